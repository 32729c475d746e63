//! A reschedule keeps to what a send keeps to (issue 49, items 7 and 8): the queue's max
//! delay, and the message's own deadline. Refused, it is a 400 `invalid_schedule` and the
//! message stays where it was.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

async fn due_of(s: &TestServer, queue: &str, id: &str) -> Value {
    let (status, message) = s.get(&format!("/v1/queues/{queue}/messages/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{message}");
    message["due_ms"].clone()
}

#[tokio::test]
async fn a_reschedule_past_the_queues_max_delay_is_refused_and_changes_nothing() {
    let s = TestServer::start().await;
    let (status, body) = s
        .call(
            Method::PATCH,
            "/v1/queues/capped",
            Some(json!({ "max_delay": "1h" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let sent = s
        .post(
            "/v1/queues/capped/messages",
            json!({ "payload": 1, "id": "m", "delay": "10m" }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    let due = due_of(&s, "capped", "m").await;

    let moved = s
        .post(
            "/v1/queues/capped/messages/m/reschedule",
            json!({ "delay": "2h" }),
        )
        .await;
    assert_error(&moved, StatusCode::BAD_REQUEST, "invalid_schedule");
    assert_eq!(due_of(&s, "capped", "m").await, due, "the message moved");

    let moved = s
        .post(
            "/v1/queues/capped/messages/m/reschedule",
            json!({ "delay": "30m" }),
        )
        .await;
    assert_eq!(moved.0, StatusCode::OK, "{}", moved.1);
}

#[tokio::test]
async fn a_reschedule_past_the_messages_deadline_is_refused_and_changes_nothing() {
    let s = TestServer::start().await;
    let sent = s
        .post(
            "/v1/queues/timed/messages",
            json!({ "payload": 1, "id": "m", "delay": "1m", "ttl": "30m" }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    let due = due_of(&s, "timed", "m").await;

    let moved = s
        .post(
            "/v1/queues/timed/messages/m/reschedule",
            json!({ "delay": "1h" }),
        )
        .await;
    assert_error(&moved, StatusCode::BAD_REQUEST, "invalid_schedule");
    assert!(
        moved.1["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("deadline"),
        "{}",
        moved.1
    );
    assert_eq!(due_of(&s, "timed", "m").await, due, "the message moved");

    let moved = s
        .post(
            "/v1/queues/timed/messages/m/reschedule",
            json!({ "delay": "10m" }),
        )
        .await;
    assert_eq!(moved.0, StatusCode::OK, "{}", moved.1);
}
