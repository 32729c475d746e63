//! Queue settings over HTTP: pause and resume (a paused queue's receive gets nothing while
//! sends are accepted; resume wakes a receive that is waiting; stats and /metrics show it)
//! and the idempotency window.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn pause_and_resume_over_http() {
    let s = TestServer::start().await;
    let (status, paused) = s.call(Method::POST, "/v1/queues/held/pause", None).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["paused"], true);
    let (status, sent) = s
        .post("/v1/queues/held/messages", json!({ "payload": "x" }))
        .await;
    assert_eq!(status, StatusCode::CREATED, "sends are accepted: {sent}");
    assert!(receive(&s, "held", 10, "300ms").await.is_empty());
    let (_, stats) = s.get("/v1/queues/held").await;
    assert_eq!(
        (&stats["ready"], &stats["paused"]),
        (&json!(1), &json!(true))
    );
    let (_, metrics) = s.get_text("/metrics").await;
    assert!(
        metrics.contains("delayq_queue_paused{queue=\"held\"} 1"),
        "{metrics}"
    );

    // A receive waiting (up to 30 s, the most allowed) when the queue resumes returns at once.
    // Its first claim (on the paused queue, finding nothing) is run by Redis before it
    // waits: once Redis ran it, only resume's wake-up can end the wait early.
    let waiting = long_poll_waiting(
        &s,
        "/v1/queues/held/receive",
        json!({ "max": 10, "lease": "30s", "wait": "30s" }),
        "held",
    )
    .await;
    assert!(
        !waiting.is_finished(),
        "a receive on a paused queue returned"
    );
    let (status, resumed) = s.call(Method::POST, "/v1/queues/held/resume", None).await;
    assert_eq!(
        (status, &resumed["paused"]),
        (StatusCode::OK, &json!(false))
    );
    let ((status, body), _) = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting receive returned after resume")
        .expect("receive task");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body["deliveries"].as_array().map(Vec::len),
        Some(1),
        "{body}"
    );

    let (status, bad) = s.call(Method::POST, "/v1/queues/no!such/pause", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{bad}");
}

#[tokio::test]
async fn the_idempotency_window_over_http() {
    let s = TestServer::start().await;
    let patch = |body: serde_json::Value| s.call(Method::PATCH, "/v1/queues/idem", Some(body));
    let (status, stats) = patch(json!({ "idempotency_window": "1h" })).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["idempotency_window_ms"], 3_600_000);
    let (status, _) = s
        .post(
            "/v1/queues/idem/messages",
            json!({ "payload": 1, "id": "close-1" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let got = receive(&s, "idem", 1, "5s").await;
    let (status, _) = s
        .post(
            "/v1/queues/idem/ack",
            json!({ "receipt": got[0]["receipt"] }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, again) = s
        .post(
            "/v1/queues/idem/messages",
            json!({ "payload": 1, "id": "close-1" }),
        )
        .await;
    assert_eq!(
        (status, &again["duplicate"]),
        (StatusCode::OK, &json!(true)),
        "{again}"
    );

    assert_error(
        &patch(json!({ "idempotency_window": "500days" })).await,
        StatusCode::BAD_REQUEST,
        "invalid_option",
    );
    assert_error(
        &patch(json!({ "idempotency_window": "soon" })).await,
        StatusCode::BAD_REQUEST,
        "invalid_duration",
    );
    assert_error(
        &patch(json!({ "speed": 1 })).await,
        StatusCode::BAD_REQUEST,
        "malformed_json",
    );
    let (_, stats) = patch(json!({ "idempotency_window": 0 })).await;
    assert_eq!(stats["idempotency_window_ms"], 0);
}

#[tokio::test]
async fn a_rate_limit_over_http() {
    let s = TestServer::start().await;
    let patch = |body: serde_json::Value| s.call(Method::PATCH, "/v1/queues/paced", Some(body));
    let (status, stats) = patch(json!({ "rate_limit": { "per_second": 5 } })).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["rate_limit"], json!({ "per_second": 5, "burst": 1 }));
    for i in 0..3 {
        let (status, _) = s
            .post("/v1/queues/paced/messages", json!({ "payload": i }))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    // A burst of 1: a receive of three gets one message; the next one waits for a token.
    assert_eq!(receive(&s, "paced", 3, "0s").await.len(), 1);
    assert_eq!(receive(&s, "paced", 3, "5s").await.len(), 1);
    // Other settings leave the limit alone; null lifts it.
    let (_, stats) = patch(json!({ "idempotency_window": "1m" })).await;
    assert_eq!(stats["rate_limit"]["per_second"], 5);
    let (_, stats) = patch(json!({ "rate_limit": null })).await;
    assert_eq!(stats["rate_limit"], serde_json::Value::Null);
    // All or nothing: a refused limit leaves the window given with it unchanged too.
    assert_error(
        &patch(json!({ "idempotency_window": "2h", "rate_limit": { "per_second": 0 } })).await,
        StatusCode::BAD_REQUEST,
        "invalid_option",
    );
    let (_, stats) = s.get("/v1/queues/paced").await;
    assert_eq!(stats["idempotency_window_ms"], 60_000);
}
