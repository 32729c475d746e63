//! What a hostile client meets before any handler runs: a token is checked from the request's
//! head, before its body is read; routes that never carry a payload take small bodies; one
//! peer cannot take every connection; and the token-less loopback mode cannot be driven by a
//! web page the operator happens to visit (cross-site forms, DNS rebinding, framing).

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

use crate::common::*;

const SEND: &str = "send-token-0123456789";
const CONSUME: &str = "consume-token-0123456789";

fn addr(s: &TestServer) -> std::net::SocketAddr {
    s.base
        .trim_start_matches("http://")
        .parse()
        .expect("address")
}

/// Writes `head` (the request line and headers, blank line included) and nothing else, then
/// reads what the server answers within `limit`: its status line, or `None` if it said
/// nothing in time.
async fn answer_to_head(s: &TestServer, head: &str, limit: Duration) -> Option<String> {
    let mut conn = TcpStream::connect(addr(s)).await.expect("connect");
    conn.write_all(head.as_bytes()).await.expect("write head");
    let mut buf = vec![0u8; 4096];
    match tokio::time::timeout(limit, conn.read(&mut buf)).await {
        Ok(Ok(n)) if n > 0 => Some(
            String::from_utf8_lossy(&buf[..n])
                .lines()
                .next()
                .unwrap_or("")
                .to_owned(),
        ),
        _ => None,
    }
}

#[tokio::test]
async fn a_request_without_a_valid_token_is_refused_before_its_body_is_read() {
    let limits = Limits {
        // Long enough that only an answer given before the body shows up in time.
        body_timeout: Duration::from_secs(30),
        ..Limits::default()
    };
    let tokens = Tokens::parse(&format!("send:{SEND}\nconsume:{CONSUME}")).expect("tokens");
    let s = TestServer::start_with(limits, tokens).await;
    let big = 16 * 1024 * 1024 - 1;
    let host = addr(&s);
    let no_token = format!(
        "POST /v1/queues/q/messages HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: {big}\r\n\r\n"
    );
    let status = answer_to_head(&s, &no_token, Duration::from_secs(3)).await;
    assert_eq!(
        status.as_deref(),
        Some("HTTP/1.1 401 Unauthorized"),
        "no token: answered at once, the 16 MiB body never read"
    );
    let wrong_role = format!(
        "POST /v1/queues/q/batch HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {CONSUME}\r\n\
         Content-Type: application/json\r\nContent-Length: {big}\r\n\r\n"
    );
    let status = answer_to_head(&s, &wrong_role, Duration::from_secs(3)).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 403 Forbidden"));
}

#[tokio::test]
async fn routes_that_carry_no_payload_take_small_bodies_only() {
    let s = TestServer::start().await;
    let host = addr(&s);
    // A control route announcing a body over its limit is refused from its head.
    let head = format!(
        "POST /v1/queues/q/ack HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Content-Length: 4000000\r\n\r\n"
    );
    let status = answer_to_head(&s, &head, Duration::from_secs(3)).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.1 413 Payload Too Large"));
    // And one that sends it without a length (chunked) is cut off at the limit.
    let chunk = format!("{{\"receipt\": \"x\"{}}}", " ".repeat(1024 * 1024));
    let request = format!(
        "POST /v1/queues/q/ack HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n\
         Transfer-Encoding: chunked\r\n\r\n{:x}\r\n{chunk}\r\n0\r\n\r\n",
        chunk.len()
    );
    let mut conn = TcpStream::connect(host).await.expect("connect");
    // The server may answer and close before all of it is written.
    let _ = conn.write_all(request.as_bytes()).await;
    let mut answer = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), conn.read(&mut answer))
        .await
        .expect("answered")
        .expect("read");
    let answer = String::from_utf8_lossy(&answer[..n]);
    assert!(
        answer.starts_with("HTTP/1.1 413") && answer.contains("body_too_large"),
        "{answer}"
    );
    // A payload route still takes a payload over the control limit.
    let (status, body) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "x".repeat(512 * 1024) }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// A connection to the server from the local address `from` (any of 127.0.0.0/8).
async fn connect_from(s: &TestServer, from: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().expect("socket");
    socket
        .bind(format!("{from}:0").parse().expect("from"))
        .expect("bind");
    socket.connect(addr(s)).await.expect("connect")
}

/// Whether the server answers a health check on `conn` (a connection it closed does not).
async fn answers(conn: &mut TcpStream, host: std::net::SocketAddr) -> bool {
    let request = format!("GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n");
    if conn.write_all(request.as_bytes()).await.is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(
        tokio::time::timeout(Duration::from_secs(3), conn.read(&mut buf)).await,
        Ok(Ok(n)) if n > 0 && buf.starts_with(b"HTTP/1.1 200")
    )
}

#[tokio::test]
async fn one_peer_cannot_take_every_connection() {
    let limits = Limits {
        max_connections_per_peer: Some(4),
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    let host = addr(&s);
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut conn = connect_from(&s, "127.0.0.1").await;
        assert!(answers(&mut conn, host).await, "within the peer's share");
        held.push(conn);
    }
    let mut fifth = connect_from(&s, "127.0.0.1").await;
    assert!(
        !answers(&mut fifth, host).await,
        "a fifth connection from the same peer is closed"
    );
    let mut other = connect_from(&s, "127.0.0.2").await;
    assert!(
        answers(&mut other, host).await,
        "another peer is still served"
    );
    held.pop();
    // Its slot is given back once the server sees the close.
    wait_until(Duration::from_secs(5), "a freed slot", || async {
        let mut again = connect_from(&s, "127.0.0.1").await;
        answers(&mut again, host).await
    })
    .await;
}

/// A request to the token-less server with extra headers; status and error code.
async fn call_with(
    s: &TestServer,
    method: reqwest::Method,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<(&str, &str)>,
) -> (StatusCode, serde_json::Value) {
    let mut req = s.http.request(method, format!("{}{path}", s.base));
    for (name, value) in headers {
        req = req.header(*name, *value);
    }
    if let Some((content_type, body)) = body {
        req = req
            .header("content-type", content_type)
            .body(body.to_owned());
    }
    read(req.send().await.expect("request")).await
}

#[tokio::test]
async fn json_routes_refuse_bodies_a_cross_site_form_can_send() {
    let s = TestServer::start().await;
    s.post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    for (path, content_type) in [
        ("/v1/queues/q/purge", "text/plain"),
        ("/v1/queues/q/requeue", "text/plain"),
        ("/v1/queues/q/receive", "application/x-www-form-urlencoded"),
        ("/v1/queues/q/pause", "multipart/form-data; boundary=x"),
    ] {
        let answer = call_with(
            &s,
            reqwest::Method::POST,
            path,
            &[],
            Some((content_type, "{\"all\": true}")),
        )
        .await;
        assert_error(
            &answer,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
        );
    }
    let (_, stats) = s.get("/v1/queues/q").await;
    assert_eq!(stats["ready"], 1, "nothing received, paused or purged");
    assert_eq!(stats["paused"], false, "{stats}");
}

/// `GET /v1/queues` as if the client had reached the server by the name `host`.
async fn list_queues_as(s: &TestServer, host: &str) -> (StatusCode, serde_json::Value) {
    let mut req = s
        .http
        .get(format!("{}/v1/queues", s.base))
        .header("host", host);
    if let Some(token) = &s.token {
        req = req.bearer_auth(token);
    }
    read(req.send().await.expect("request")).await
}

#[tokio::test]
async fn without_tokens_only_names_the_server_answers_to_are_accepted() {
    let s = TestServer::start().await;
    let port = addr(&s).port();
    // A page on evil.example whose name now resolves to 127.0.0.1 (DNS rebinding).
    for host in [format!("evil.example:{port}"), "evil.example".to_owned()] {
        let answer = list_queues_as(&s, &host).await;
        assert_error(&answer, StatusCode::FORBIDDEN, "host_not_allowed");
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let answer = list_queues_as(&s, &host).await;
        assert_eq!(answer.0, StatusCode::OK, "{host}: {}", answer.1);
    }
    // A client that names no host (HTTP/1.0, a bare health probe) is not a browser page.
    let status = answer_to_head(&s, "GET /healthz HTTP/1.0\r\n\r\n", Duration::from_secs(3)).await;
    assert_eq!(status.as_deref(), Some("HTTP/1.0 200 OK"));
    // With tokens, a token is what decides: any name may be used to reach the server.
    let tokens = Tokens::parse(&format!("admin:{SEND}")).expect("tokens");
    let mut secured = TestServer::start_with(Limits::default(), tokens).await;
    secured.token = Some(SEND.into());
    let answer = list_queues_as(&secured, "delayq.internal.example").await;
    assert_eq!(answer.0, StatusCode::OK, "{}", answer.1);
}

#[tokio::test]
async fn state_changes_from_another_origin_are_refused() {
    let s = TestServer::start().await;
    let port = addr(&s).port();
    s.post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    let json_body = Some(("application/json", "{\"all\": true}"));
    for headers in [
        vec![("origin", "https://evil.example")],
        vec![("origin", "null")],
        vec![("sec-fetch-site", "cross-site")],
        vec![("sec-fetch-site", "same-site")],
    ] {
        let answer = call_with(
            &s,
            reqwest::Method::POST,
            "/v1/queues/q/purge",
            &headers,
            json_body,
        )
        .await;
        assert_error(&answer, StatusCode::FORBIDDEN, "cross_origin");
        // A raw send takes any content type, so only the origin check stops a form's.
        let answer = call_with(
            &s,
            reqwest::Method::POST,
            "/v1/queues/q/messages",
            &headers,
            Some(("text/plain", "hello")),
        )
        .await;
        assert_error(&answer, StatusCode::FORBIDDEN, "cross_origin");
    }
    let (_, stats) = s.get("/v1/queues/q").await;
    assert_eq!(stats["ready"], 1, "nothing purged or sent: {stats}");
    // The server's own pages, and clients that are not browsers, go ahead.
    let own = format!("http://127.0.0.1:{port}");
    for headers in [
        vec![("origin", own.as_str()), ("sec-fetch-site", "same-origin")],
        vec![("sec-fetch-site", "none")],
        vec![],
    ] {
        let answer = call_with(
            &s,
            reqwest::Method::POST,
            "/v1/queues/q/messages",
            &headers,
            Some(("application/json", "{\"payload\": 2}")),
        )
        .await;
        assert_eq!(answer.0, StatusCode::CREATED, "{headers:?}: {}", answer.1);
    }
    // Reads are not state changes: a cross-site GET is answered (and unreadable to the page
    // by the browser's same-origin policy).
    let answer = call_with(
        &s,
        reqwest::Method::GET,
        "/v1/queues/q",
        &[("sec-fetch-site", "cross-site")],
        None,
    )
    .await;
    assert_eq!(answer.0, StatusCode::OK);
}

#[tokio::test]
async fn no_page_can_frame_the_server_or_sniff_its_answers() {
    let s = TestServer::start().await;
    for path in [
        "/healthz",
        "/v1/queues",
        "/ui",
        "/ui/login",
        "/no/such/route",
    ] {
        let resp = s
            .http
            .get(format!("{}{path}", s.base))
            .send()
            .await
            .expect("request");
        let h = resp.headers();
        assert_eq!(h["x-frame-options"], "DENY", "{path}");
        assert_eq!(h["x-content-type-options"], "nosniff", "{path}");
        let csp = h["content-security-policy"].to_str().expect("ascii");
        assert!(csp.contains("frame-ancestors 'none'"), "{path}: {csp}");
    }
}
