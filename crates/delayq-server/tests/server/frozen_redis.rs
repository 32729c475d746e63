//! A Redis that stops answering (frozen with SIGSTOP: connections stay open, nothing comes
//! back) costs each request at most the Redis timeout, then a 503, whatever the route does
//! in Redis; once Redis answers again, so does the server.

use std::time::{Duration, Instant};

use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use rustix::process::{kill_process, Pid, Signal};
use serde_json::json;

use crate::common::*;

fn signal(s: &TestServer, signal: Signal) {
    let pid = s.redis.pid().expect("redis runs");
    let pid = Pid::from_raw(pid as i32).expect("a pid");
    kill_process(pid, signal).expect("signal redis");
}

#[tokio::test]
async fn every_call_answers_503_within_the_redis_timeout_when_redis_freezes() {
    // The harness's client gives Redis 1 s (common::client_config).
    let timeout = Duration::from_secs(1);
    let s = TestServer::start_with(Limits::default(), Default::default()).await;
    let (status, _) = s
        .post("/v1/queues/q/messages", json!({ "payload": 1, "id": "m1" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let receipt = "0123456789abcdef01234567gm1";
    signal(&s, Signal::STOP);
    let calls = [
        (
            Method::POST,
            "/v1/queues/q/messages",
            Some(json!({ "payload": 2 })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/messages",
            Some(json!({ "payload": 2 })),
        ),
        (Method::GET, "/v1/queues/q/messages/m1", None),
        (Method::GET, "/v1/queues/q", None),
        (Method::GET, "/v1/queues", None),
        (
            Method::POST,
            "/v1/queues/q/receive",
            Some(json!({ "max": 1 })),
        ),
        (
            Method::POST,
            "/v1/queues/q/receive",
            Some(json!({ "max": 1, "wait": "1s" })),
        ),
        (
            Method::POST,
            "/v1/queues/q/ack",
            Some(json!({ "receipt": receipt })),
        ),
        (Method::DELETE, "/v1/queues/q/messages/m1", None),
        (Method::POST, "/v1/queues/q/pause", None),
    ];
    let mut slow = Vec::new();
    for (method, path, body) in calls {
        let waits = body
            .as_ref()
            .and_then(|b| b.get("wait"))
            .map_or(Duration::ZERO, |_| Duration::from_secs(1));
        let started = Instant::now();
        let answer = s.call(method.clone(), path, body).await;
        let took = started.elapsed();
        assert_eq!(
            answer.0,
            StatusCode::SERVICE_UNAVAILABLE,
            "{method} {path}: {}",
            answer.1
        );
        // The promise (README): the timeout, plus a long-poll's wait, plus a little slack.
        if took > timeout + waits + Duration::from_millis(500) {
            slow.push(format!("{method} {path} took {took:?}"));
        }
    }
    signal(&s, Signal::CONT);
    assert!(slow.is_empty(), "over the Redis timeout: {slow:#?}");
    wait_until(
        Duration::from_secs(10),
        "the server to answer again",
        || async { s.get("/v1/queues/q").await.0 == StatusCode::OK },
    )
    .await;
}
