//! Pause and resume over HTTP and from the CLI: a paused queue's receive gets nothing while
//! sends are accepted; resume wakes a receive that is waiting; stats and /metrics show it.

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
    let metrics = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .expect("metrics")
        .text()
        .await
        .expect("text");
    assert!(
        metrics.contains("delayq_queue_paused{queue=\"held\"} 1"),
        "{metrics}"
    );

    // A receive waiting (up to 30 s, the most allowed) when the queue resumes returns at once.
    let waiting = {
        let base = s.base.clone();
        let http = s.http.clone();
        tokio::spawn(async move {
            let resp = http
                .post(format!("{base}/v1/queues/held/receive"))
                .json(&json!({ "max": 10, "lease": "30s", "wait": "30s" }))
                .send()
                .await
                .expect("receive");
            read(resp).await
        })
    };
    // Paused, the receive has nothing to return for 30 s; it returns within the 10 s
    // below only if resume wakes it (or if it had not yet begun to wait).
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiting.is_finished(),
        "a receive on a paused queue returned"
    );
    let (status, resumed) = s.call(Method::POST, "/v1/queues/held/resume", None).await;
    assert_eq!(
        (status, &resumed["paused"]),
        (StatusCode::OK, &json!(false))
    );
    let (status, body) = tokio::time::timeout(Duration::from_secs(10), waiting)
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
