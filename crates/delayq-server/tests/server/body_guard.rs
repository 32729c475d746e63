//! What bounds a request body on every route, whatever reads it (issue 49, item 1): the
//! dashboard's forms take a few KiB and refuse a larger `Content-Length` at once, every body
//! must arrive within the server-wide deadline (the login form, which needs no token,
//! included), and the bytes of bodies in flight across the server are bounded.

use std::time::{Duration, Instant};

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

const ADMIN: &str = "admin-token-for-body-tests";

fn tokens() -> Tokens {
    Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens")
}

async fn connect(s: &TestServer) -> TcpStream {
    TcpStream::connect(s.base.trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// What the server answers before it closes the connection, or `None` if it neither
/// answers nor closes within `limit`.
async fn answer_within(conn: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => {
                answer.extend_from_slice(&buf[..n]);
                // A whole head is enough to know the status.
                if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                    break;
                }
            }
            Err(_) => return None,
        }
    }
    Some(String::from_utf8_lossy(&answer).into_owned())
}

fn form_head(path: &str, length: usize) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {length}\r\n\r\n"
    )
}

#[tokio::test]
async fn a_login_form_that_announces_megabytes_is_refused_at_once() {
    let s = TestServer::start_with(Limits::default(), tokens()).await;
    let mut conn = connect(&s).await;
    // The head only: the body never comes. No token is needed to reach the login form.
    conn.write_all(form_head("/ui/login", 16_000_000).as_bytes())
        .await
        .expect("write");
    let answer = answer_within(&mut conn, Duration::from_secs(5))
        .await
        .expect("the server answers without waiting for the body");
    assert!(answer.starts_with("HTTP/1.1 413"), "answer: {answer:.200}");
}

#[tokio::test]
async fn every_form_of_the_dashboard_has_the_small_limit() {
    let s = TestServer::start_with(Limits::default(), tokens()).await;
    for path in [
        "/ui/logout",
        "/ui/queues/q/act",
        "/ui/queues/q/messages/m/act",
    ] {
        let mut conn = connect(&s).await;
        let head = form_head(path, 1_000_000);
        // Logged in, so that the route reaches its body.
        let cookie = login_cookie(&s).await;
        let head = head.replace("\r\n\r\n", &format!("\r\nCookie: {cookie}\r\n\r\n"));
        conn.write_all(head.as_bytes()).await.expect("write");
        let answer = answer_within(&mut conn, Duration::from_secs(5))
            .await
            .expect("answered at once");
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer:.200}");
    }
}

/// A session cookie (`name=value`) of the admin token.
async fn login_cookie(s: &TestServer) -> String {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let resp = client
        .post(format!("{}/ui/login", s.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={ADMIN}"))
        .send()
        .await
        .expect("login");
    let set = resp
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a session cookie")
        .to_owned();
    set.split(';').next().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_trickled_login_form_is_cut_off_at_the_body_deadline() {
    let limits = Limits {
        body_timeout: Duration::from_millis(500),
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, tokens()).await;
    let mut conn = connect(&s).await;
    conn.write_all(form_head("/ui/login", 4000).as_bytes())
        .await
        .expect("write");
    let started = Instant::now();
    let (mut read_half, mut write_half) = conn.split();
    let trickle = async {
        for _ in 0..100 {
            if write_half.write_all(b"t").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    let answer = async {
        let mut answer = Vec::new();
        let _ =
            tokio::time::timeout(Duration::from_secs(4), read_half.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    };
    let ((), answer) = tokio::join!(trickle, answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "answer: {answer:.200}");
    assert!(answer.contains("body_timeout"), "answer: {answer:.400}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "cut off after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn bytes_of_bodies_in_flight_are_bounded_across_the_server() {
    let limits = Limits {
        max_body_bytes_in_flight: 64 * 1024,
        body_timeout: Duration::from_secs(20),
        ..Limits::default()
    };
    let mut s = TestServer::start_with(limits, tokens()).await;
    s.token = Some(ADMIN.to_owned());

    // One client sends 60 KiB of a 100 KiB body, then stalls.
    let mut stalled = connect(&s).await;
    let head = format!(
        "POST /v1/queues/q/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n\
         Authorization: Bearer {ADMIN}\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {}\r\n\r\n",
        100 * 1024
    );
    stalled.write_all(head.as_bytes()).await.expect("write");
    stalled
        .write_all(&vec![b'x'; 60 * 1024])
        .await
        .expect("write");

    // Another's 30 KiB body does not fit beside it: a 503, at once, not a wait.
    let body = "y".repeat(30 * 1024);
    wait_until(
        Duration::from_secs(5),
        "a 503 beside the stalled body",
        || {
            let req = s
                .http
                .post(format!("{}/v1/queues/q/messages", s.base))
                .bearer_auth(ADMIN)
                .header("content-type", "application/octet-stream")
                .body(body.clone());
            async move {
                let resp = req.send().await.expect("request");
                if resp.status() == StatusCode::SERVICE_UNAVAILABLE {
                    let (_, answer) = read(resp).await;
                    assert_eq!(answer["error"]["code"], "server_busy", "{answer}");
                    return true;
                }
                // Sent before the stalled bytes were read: take it back out of the count.
                assert_eq!(resp.status(), StatusCode::CREATED);
                false
            }
        },
    )
    .await;

    // Once the stalled client is gone, its bytes are free again.
    drop(stalled);
    wait_until(Duration::from_secs(5), "the body to be taken", || async {
        let resp = s
            .http
            .post(format!("{}/v1/queues/q/messages", s.base))
            .bearer_auth(ADMIN)
            .header("content-type", "application/octet-stream")
            .body(body.clone())
            .send()
            .await
            .expect("request");
        resp.status() == StatusCode::CREATED
    })
    .await;
}

/// A body refused for its size is answered with `Connection: close`: the server does not read
/// the rest, so it closes the connection after the answer, and a client that reused it for
/// its next request would see that request fail (the Go client's S8 saw it, 2 in 200).
#[tokio::test]
async fn a_refused_body_says_the_connection_closes() {
    let limits = Limits {
        max_body_bytes: 4096,
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, tokens()).await;
    for (path, content_type) in [
        ("/v1/queues/q/messages", "application/json"),
        ("/ui/login", "application/x-www-form-urlencoded"),
    ] {
        let mut conn = connect(&s).await;
        let body = format!("{{\"payload\": \"{}\"}}", "x".repeat(8192));
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
             Content-Type: {content_type}\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes()).await.expect("write");
        let answer = answer_within(&mut conn, Duration::from_secs(5))
            .await
            .expect("an answer");
        assert!(answer.starts_with("HTTP/1.1 413"), "{path}: {answer:.300}");
        assert!(
            answer
                .to_ascii_lowercase()
                .contains("\r\nconnection: close\r\n"),
            "{path}: {answer:.500}"
        );
    }
}
