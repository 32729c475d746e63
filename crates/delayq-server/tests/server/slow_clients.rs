//! Clients that hold the server's resources without finishing a request: headers trickled
//! in (slowloris), connections opened and left idle, headers far too large, bodies that
//! never finish. Each is bounded by a limit, so they cannot starve other clients.

use std::time::{Duration, Instant};

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;

fn tight() -> Limits {
    Limits {
        header_timeout: Duration::from_millis(500),
        body_timeout: Duration::from_millis(500),
        max_connections: 20,
        ..Limits::default()
    }
}

async fn connect(s: &TestServer) -> TcpStream {
    TcpStream::connect(s.base.trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// Reads until the server closes the connection (or `limit` passes); what it said.
async fn until_closed(conn: &mut TcpStream, limit: Duration) -> Option<String> {
    let mut answer = Vec::new();
    let read = tokio::time::timeout(limit, conn.read_to_end(&mut answer)).await;
    match read {
        Ok(_) => Some(String::from_utf8_lossy(&answer).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test]
async fn headers_trickled_in_slowly_are_cut_off_at_the_header_timeout() {
    let s = TestServer::start_with(tight(), Tokens::default()).await;
    let mut conn = connect(&s).await;
    let started = Instant::now();
    // One header line every 100 ms, never the blank line that ends them.
    let trickle = async {
        conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            .await?;
        for i in 0..100 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            conn.write_all(format!("X-Slow-{i}: y\r\n").as_bytes())
                .await?;
        }
        Ok::<(), std::io::Error>(())
    };
    let cut = tokio::time::timeout(Duration::from_secs(5), trickle).await;
    assert!(
        matches!(cut, Ok(Err(_))),
        "the server kept reading trickled headers for 5 s"
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "cut off after {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_idle_connection_is_closed_at_the_header_timeout() {
    let s = TestServer::start_with(tight(), Tokens::default()).await;
    let mut conn = connect(&s).await;
    let closed = until_closed(&mut conn, Duration::from_secs(5)).await;
    assert!(closed.is_some(), "an idle connection was held open for 5 s");
}

#[tokio::test]
async fn connections_over_the_limit_are_refused_and_idle_ones_do_not_lock_clients_out() {
    let s = TestServer::start_with(tight(), Tokens::default()).await;
    let mut idle = Vec::new();
    for _ in 0..20 {
        idle.push(connect(&s).await);
    }
    // Let the server accept all twenty before the next one.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut extra = connect(&s).await;
    let closed = until_closed(&mut extra, Duration::from_millis(400)).await;
    assert_eq!(
        closed.as_deref(),
        Some(""),
        "the 21st connection is closed at once, unanswered"
    );

    // The idle ones time out, and ordinary requests get through again.
    wait_until(
        Duration::from_secs(5),
        "a request to get through",
        || async {
            match s.http.get(format!("{}/healthz", s.base)).send().await {
                Ok(resp) => resp.status() == StatusCode::OK,
                Err(_) => false,
            }
        },
    )
    .await;
}

#[tokio::test]
async fn huge_headers_are_a_431() {
    let s = TestServer::start().await;
    let mut conn = connect(&s).await;
    let big = "x".repeat(64 * 1024);
    let request = format!("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: {big}\r\n\r\n");
    let _ = conn.write_all(request.as_bytes()).await;
    let answer = until_closed(&mut conn, Duration::from_secs(5))
        .await
        .expect("the server answers and closes");
    assert!(answer.starts_with("HTTP/1.1 431"), "answer: {answer:.60}");
}

#[tokio::test]
async fn a_body_that_never_finishes_is_a_408_at_the_body_timeout() {
    let s = TestServer::start_with(tight(), Tokens::default()).await;
    let mut conn = connect(&s).await;
    let head = "POST /v1/queues/q/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"payload\":";
    conn.write_all(head.as_bytes()).await.expect("write");
    let started = Instant::now();
    let answer = until_closed(&mut conn, Duration::from_secs(5))
        .await
        .expect("the server answers within 5 s");
    assert!(answer.starts_with("HTTP/1.1 408"), "answer: {answer:.200}");
    assert!(answer.contains("body_timeout"), "answer: {answer}");
    assert!(started.elapsed() < Duration::from_secs(3));
    let (status, stats) = s.get("/v1/queues/q").await;
    assert!(
        status == StatusCode::OK || status == StatusCode::NOT_FOUND,
        "{status}"
    );
    assert_eq!(stats["ready"].as_u64().unwrap_or(0), 0, "nothing was sent");
}
