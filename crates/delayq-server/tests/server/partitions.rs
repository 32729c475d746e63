//! Partitioned queues over HTTP: created with a partition count, then sent to, received
//! from, settled by receipt and counted as one queue.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn a_partitioned_queue_works_as_one_over_http() {
    let s = TestServer::start().await;
    let create = |partitions: u64| {
        s.call(
            Method::PUT,
            "/v1/queues/parted",
            Some(json!({ "partitions": partitions })),
        )
    };
    let (status, created) = create(4).await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(created["partitions"], 4);
    assert_eq!(create(4).await.0, StatusCode::OK, "the same count again");
    let refused = create(5).await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "invalid_option");
    assert!(
        refused.1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("already has 4")),
        "{}",
        refused.1
    );
    assert_error(&create(0).await, StatusCode::BAD_REQUEST, "invalid_option");

    // Sends spread over the partitions; each is found again by id.
    let mut ids = Vec::new();
    for i in 0..20 {
        let (status, sent) = s
            .post(
                "/v1/queues/parted/messages",
                json!({ "payload": format!("m{i}") }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
        ids.push(sent["id"].as_str().expect("id").to_owned());
    }
    for id in &ids {
        let (status, got) = s.get(&format!("/v1/queues/parted/messages/{id}")).await;
        assert_eq!((status, &got["id"]), (StatusCode::OK, &json!(id)));
    }
    let (_, stats) = s.get("/v1/queues/parted").await;
    assert_eq!(
        (&stats["ready"], &stats["partitions"]),
        (&json!(20), &json!(4))
    );

    // Received from every partition; acked and nacked by receipt.
    let mut got = Vec::new();
    while got.len() < 20 {
        let batch = receive(&s, "parted", 20, "5s").await;
        assert!(!batch.is_empty(), "received {} of 20", got.len());
        got.extend(batch);
    }
    for (i, d) in got.iter().enumerate() {
        let (path, body) = if i % 2 == 0 {
            ("ack", json!({ "receipt": d["receipt"] }))
        } else {
            (
                "nack",
                json!({ "receipt": d["receipt"], "error": "no", "dead": true }),
            )
        };
        let (status, answer) = s.post(&format!("/v1/queues/parted/{path}"), body).await;
        assert!(status.is_success(), "{path}: {answer}");
    }
    let (_, stats) = s.get("/v1/queues/parted").await;
    assert_eq!(
        (&stats["ready"], &stats["in_flight"], &stats["dead"]),
        (&json!(0), &json!(0), &json!(10))
    );
    let (_, dead) = s.get("/v1/queues/parted/dead?limit=100").await;
    assert_eq!(dead["total"], 10);
    assert_eq!(dead["dead_letters"].as_array().map(Vec::len), Some(10));
    // Metrics count the queue as one, whichever partition a message was in.
    let (_, text) = s.get_text("/metrics").await;
    for line in [
        "delayq_messages_sent_total{queue=\"parted\"} 20",
        "delayq_messages_acked_total{queue=\"parted\"} 10",
        "delayq_messages{queue=\"parted\",state=\"dead\"} 10",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    let (_, queues) = s.get("/v1/queues").await;
    assert_eq!(queues["queues"][0]["partitions"], 4, "{queues}");
}

#[tokio::test]
async fn a_send_can_wait_for_replicas() {
    // The test Redis has no replica: the send is written, and answered 503.
    let s = TestServer::start().await;
    let body = json!({ "payload": "x", "id": "w1", "replicas": { "count": 1, "timeout": "50ms" } });
    let answer = s.post("/v1/queues/durable/messages", body).await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "not_replicated");
    let (status, _) = s.get("/v1/queues/durable/messages/w1").await;
    assert_eq!(status, StatusCode::OK, "written all the same");
    let none = json!({ "payload": "y", "replicas": { "count": 0 } });
    let (status, _) = s.post("/v1/queues/durable/messages", none).await;
    assert_eq!(status, StatusCode::CREATED);
    let too_long = json!({ "payload": "z", "replicas": { "count": 1, "timeout": "2h" } });
    let answer = s.post("/v1/queues/durable/messages", too_long).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
}
