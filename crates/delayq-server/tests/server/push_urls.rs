//! A message's own push URL and headers, against real receivers over HTTP: the target's
//! headers go only to the target's URL; a message's URL must be on the target's list of
//! allowed origins (set by an admin), checked when it is sent and again when it is pushed;
//! headers that would change how a request is framed or routed are refused.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::Receiver;

const SEND: &str = "send-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

/// A server with tokens that may push to loopback (the receivers listen there).
async fn secured() -> TestServer {
    secured_allowing("127.0.0.0/8").await
}

/// A server with tokens that may push to `network`.
async fn secured_allowing(network: &str) -> TestServer {
    let limits = Limits {
        push_allow: vec![network.parse().expect("network")],
        ..Limits::default()
    };
    let tokens = Tokens::parse(&format!("send:{SEND}\nadmin:{ADMIN}")).expect("tokens");
    TestServer::start_with(limits, tokens).await
}

/// Sets `queue`'s target as the admin; returns the answer.
async fn put_target(s: &mut TestServer, queue: &str, body: Value) -> (StatusCode, Value) {
    s.token = Some(ADMIN.into());
    let answer = s
        .call(Method::PUT, &format!("/v1/queues/{queue}/push"), Some(body))
        .await;
    s.token = Some(SEND.into());
    answer
}

async fn wait_for(receiver: &Receiver, id: &str) -> crate::receiver::Seen {
    wait_until(
        Duration::from_secs(10),
        &format!("a push of {id}"),
        || async { !receiver.for_id(id).is_empty() },
    )
    .await;
    receiver.for_id(id).remove(0)
}

#[tokio::test]
async fn a_send_token_cannot_take_the_targets_credentials() {
    let mut s = secured().await;
    let target = Receiver::start().await;
    let attacker = Receiver::start().await;
    let secret = "Bearer admin-secret-for-the-receiver";
    let target_body = json!({
        "url": format!("{}/hook", target.url),
        "headers": { "authorization": secret, "x-team": "shop" },
    });
    let (status, body) = put_target(&mut s, "creds", target_body.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // A send token points a message at its own host: refused (the target allows no message
    // URLs), so the target's credentials never leave for it.
    let steal = json!({ "payload": 1, "id": "steal",
        "push": { "url": format!("{}/collect", attacker.url) } });
    let answer = s.post("/v1/queues/creds/messages", steal.clone()).await;
    if answer.0.is_success() {
        let seen = wait_for(&attacker, "steal").await;
        assert_eq!(
            seen.header("authorization"),
            "",
            "the target's credentials went to a message's own URL"
        );
    }
    assert_error(&answer, StatusCode::BAD_REQUEST, "push_url_not_allowed");
    assert_eq!(body["allow_message_urls"], json!([]), "{body}");

    // The admin allows the origin: the message goes there, without the target's headers.
    let mut allowing = target_body.clone();
    allowing["allow_message_urls"] = json!([attacker.url]);
    let (status, body) = put_target(&mut s, "creds", allowing).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["allow_message_urls"], json!([attacker.url]), "{body}");
    let mut own = steal.clone();
    own["id"] = json!("own");
    own["push"]["headers"] = json!({ "x-tenant": "7" });
    let (status, body) = s.post("/v1/queues/creds/messages", own).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let seen = wait_for(&attacker, "own").await;
    assert_eq!(seen.path, "/collect");
    assert_eq!(seen.header("authorization"), "", "{:?}", seen.headers);
    assert_eq!(seen.header("x-team"), "");
    assert_eq!(seen.header("x-tenant"), "7");
    assert!(!seen.header("delayq-signature").is_empty());

    // A message's headers add to the target's on the target's URL, and cannot replace them.
    let plain = json!({ "payload": 2, "id": "plain",
        "push": { "headers": { "authorization": "Bearer mine", "x-tenant": "8" } } });
    let (status, body) = s.post("/v1/queues/creds/messages", plain).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let seen = wait_for(&target, "plain").await;
    assert_eq!(seen.header("authorization"), secret);
    assert_eq!(seen.header("x-tenant"), "8");
    assert!(attacker.for_id("plain").is_empty());
}

#[tokio::test]
async fn message_urls_must_match_an_allowed_origin_exactly() {
    let mut s = secured().await;
    let target = Receiver::start().await;
    let allowed = Receiver::start().await;
    let other = Receiver::start().await;
    let base = json!({ "url": format!("{}/hook", target.url),
        "allow_message_urls": [format!("{}/", allowed.url)] });
    let (status, body) = put_target(&mut s, "origins", base.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // Kept as an origin: scheme, host and port.
    assert_eq!(body["allow_message_urls"], json!([allowed.url]), "{body}");

    let port = allowed.url.rsplit(':').next().expect("port");
    for (url, why) in [
        (format!("{}/x", other.url), "another port"),
        (format!("http://localhost:{port}/x"), "another host name"),
        (format!("https://127.0.0.1:{port}/x"), "another scheme"),
    ] {
        let answer = s
            .post(
                "/v1/queues/origins/messages",
                json!({ "payload": 1, "push": { "url": url } }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "push_url_not_allowed");
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("allow_message_urls"), "{why}: {message}");
    }
    // In a batch, one refused URL refuses the batch.
    let batch = json!({ "messages": [
        { "payload": 1, "push": { "url": format!("{}/ok", allowed.url) } },
        { "payload": 2, "push": { "url": format!("{}/x", other.url) } },
    ] });
    let answer = s.post("/v1/queues/origins/batch", batch).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "push_url_not_allowed");

    let ok = json!({ "payload": 1, "id": "ok", "delay": "1s",
        "push": { "url": format!("{}/orders/1", allowed.url) } });
    let (status, body) = s.post("/v1/queues/origins/messages", ok).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // An admin takes the origin off the list before it is due: never pushed, a dead letter
    // that says why.
    let (status, body) = put_target(&mut s, "origins", json!({ "url": base["url"] })).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_until(Duration::from_secs(10), "the dead letter", || async {
        s.get("/v1/queues/origins/messages/ok").await.1["state"] == "dead"
    })
    .await;
    let (_, dead) = s.get("/v1/queues/origins/messages/ok").await;
    let error = dead["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("allow_message_urls"), "{dead}");
    assert!(
        allowed.seen().is_empty(),
        "pushed to an origin no longer allowed"
    );

    // Allowed origins are origins: no path, query or credentials; http or https.
    for bad in [
        json!(["ftp://example.com"]),
        json!(["https://example.com/path"]),
        json!(["https://example.com/?q=1"]),
        json!(["https://user:pw@example.com"]),
        json!(["not a url"]),
    ] {
        let mut body = base.clone();
        body["allow_message_urls"] = bad.clone();
        let answer = put_target(&mut s, "origins", body).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_push_target");
    }
}

#[tokio::test]
async fn headers_that_frame_or_route_a_request_are_refused() {
    let mut s = secured().await;
    let target = Receiver::start().await;
    let (status, body) = put_target(
        &mut s,
        "hdr",
        json!({ "url": format!("{}/hook", target.url) }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = [
        "host",
        "Content-Length",
        "transfer-encoding",
        "connection",
        "keep-alive",
        "te",
        "trailer",
        "upgrade",
        "proxy-authorization",
        "Proxy-Connection",
        "delayq-signature",
        "delayq-attempt",
        "expect",
    ];
    for name in refused {
        let answer = s
            .post(
                "/v1/queues/hdr/messages",
                json!({ "payload": 1, "push": { "headers": { name: "x" } } }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message
                .to_ascii_lowercase()
                .contains(&name.to_ascii_lowercase()),
            "{message}"
        );
        let answer = put_target(
            &mut s,
            "hdr",
            json!({ "url": format!("{}/hook", target.url), "headers": { name: "x" } }),
        )
        .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_push_target");
    }
    for headers in [
        json!({ "bad name": "x" }),
        json!({ "x-ok": "line\r\nbreak" }),
        json!({ "": "x" }),
        json!({ "x-long": "v".repeat(9000) }),
    ] {
        let answer = s
            .post(
                "/v1/queues/hdr/messages",
                json!({ "payload": 1, "push": { "headers": headers } }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
    }
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("x-h{i}"), json!("v"))).collect();
    let answer = s
        .post(
            "/v1/queues/hdr/messages",
            json!({ "payload": 1, "push": { "headers": many } }),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
    assert!(target.seen().is_empty(), "a refused message was pushed");
}

#[tokio::test]
async fn a_refused_message_url_names_its_host_and_class_not_its_address() {
    // Only 127.0.0.2 may be reached; `localhost` resolves to 127.0.0.1.
    let mut s = secured_allowing("127.0.0.2/32").await;
    let target = Receiver::start_on("127.0.0.2").await;
    let internal = Receiver::start().await;
    let port = internal.url.rsplit(':').next().expect("port");
    let named = format!("http://localhost:{port}");
    let (status, body) = put_target(
        &mut s,
        "names",
        json!({ "url": format!("{}/hook", target.url), "allow_message_urls": [named] }),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .post(
            "/v1/queues/names/messages",
            json!({ "payload": 1, "id": "n", "max_attempts": 3,
                    "push": { "url": format!("{named}/x") } }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_until(Duration::from_secs(10), "the dead letter", || async {
        s.get("/v1/queues/names/messages/n").await.1["state"] == "dead"
    })
    .await;
    // What the send token reads back: the host and why, not what the name resolves to.
    let (_, dead) = s.get("/v1/queues/names/messages/n").await;
    let error = dead["last_error"].as_str().unwrap_or_default();
    assert!(
        error.contains("localhost") && error.contains("loopback"),
        "{dead}"
    );
    assert!(!error.contains("127.0.0.1"), "{dead}");
    assert!(internal.seen().is_empty());
    // An admin setting a target is told more.
    let answer = put_target(&mut s, "names", json!({ "url": format!("{named}/hook") })).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "push_target_refused");
    let message = answer.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("127.0.0.1"), "{message}");
}
