//! Groups over HTTP: `group` on a JSON send and as a query parameter of a raw one, a queue's
//! `group_concurrency` set by PATCH and shown in its stats, deliveries and lookups that name
//! their group, and a bad group or an older queue answered with a clear error.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn groups_take_turns_and_a_group_of_concurrency_one_goes_in_order() {
    let s = TestServer::start().await;
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/tenants",
            Some(json!({ "group_concurrency": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["group_concurrency"], 1);

    let mut messages: Vec<_> = (0..50)
        .map(|i| json!({ "payload": { "n": i }, "group": "heavy" }))
        .collect();
    messages.push(json!({ "payload": "light", "group": "light" }));
    let (status, body) = s
        .post("/v1/queues/tenants/batch", json!({ "messages": messages }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // A raw body names its group in the query string.
    let resp = s
        .http
        .post(format!(
            "{}/v1/queues/tenants/messages?group=raw&id=r1",
            s.base
        ))
        .header("content-type", "application/octet-stream")
        .body("raw bytes")
        .send()
        .await
        .expect("raw send");
    assert_eq!(resp.status(), StatusCode::CREATED);

    // One of each group: heavy's first, light, raw; heavy's next waits for its ack.
    let got = receive(&s, "tenants", 10, "0s").await;
    let groups: Vec<_> = got.iter().map(|d| d["group"].clone()).collect();
    assert_eq!(groups, [json!("heavy"), json!("light"), json!("raw")]);
    assert_eq!(got[0]["payload"], json!({ "n": 0 }));
    assert!(receive(&s, "tenants", 10, "0s").await.is_empty());
    let (status, _) = s
        .post(
            "/v1/queues/tenants/ack",
            json!({ "receipt": got[0]["receipt"] }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let next = receive(&s, "tenants", 10, "0s").await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0]["payload"], json!({ "n": 1 }));

    let (status, raw) = s.get("/v1/queues/tenants/messages/r1").await;
    assert_eq!(status, StatusCode::OK, "{raw}");
    assert_eq!(
        (raw["state"].as_str(), raw["group"].as_str()),
        (Some("in_flight"), Some("raw"))
    );
    let (_, stats) = s.get("/v1/queues/tenants").await;
    assert_eq!(
        (stats["groups"].as_u64(), stats["ready"].as_u64()),
        (Some(3), Some(48))
    );

    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/tenants",
            Some(json!({ "group_concurrency": null })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(stats["group_concurrency"], serde_json::Value::Null);
    s.shutdown().await;
}

#[tokio::test]
async fn a_bad_group_or_limit_is_a_400_and_writes_nothing() {
    let s = TestServer::start().await;
    let before = all_keys(&s.redis);
    for group in ["", "with space", "x{y}", &"g".repeat(129)] {
        let answer = s
            .post(
                "/v1/queues/q/messages",
                json!({ "payload": 1, "group": group }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_group");
    }
    let answer = s
        .call(
            Method::PATCH,
            "/v1/queues/q",
            Some(json!({ "group_concurrency": 0 })),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
    assert_eq!(all_keys(&s.redis), before, "a refused request wrote");
    s.shutdown().await;
}

#[tokio::test]
async fn a_queue_of_an_older_format_refuses_groups_with_409() {
    let s = TestServer::start().await;
    let (status, _) = s
        .post("/v1/queues/old/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    s.redis.cli(&["HSET", "dq:{old}:control", "format", "2"]);
    let fresh = s.start_beside(Default::default()).await;
    let answer = fresh
        .post(
            "/v1/queues/old/messages",
            json!({ "payload": 2, "group": "g" }),
        )
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "older_data_format");
    fresh.shutdown().await;
    s.shutdown().await;
}
