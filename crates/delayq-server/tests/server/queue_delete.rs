//! `DELETE /v1/queues/{queue}` over real HTTP: refused while the queue holds messages unless
//! forced; what the server keeps of a queue (push index, webhooks, metric gauges) goes with
//! it; bad input has its answers; and sends that race a delete keep every accepted message.

use std::time::Duration;

use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::receiver::Receiver;

/// Members of the Redis set or fields of the hash `key`, as text.
fn members(s: &TestServer, command: &str, key: &str) -> String {
    s.redis.cli(&[command, key])
}

#[tokio::test]
async fn a_queue_is_deleted_with_its_push_target_webhooks_and_gauges_and_refused_while_it_holds_messages(
) {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, delayq_server::auth::Tokens::default()).await;
    let receiver = Receiver::start().await;
    let q = "/v1/queues/retired";
    for (method, path, body) in [
        (
            Method::PUT,
            format!("{q}/push"),
            json!({ "url": format!("{}/hook", receiver.url) }),
        ),
        (
            Method::PUT,
            format!("{q}/webhooks"),
            json!({ "webhooks": [{ "url": format!("{}/events", receiver.url), "kinds": ["sent"] }] }),
        ),
        (Method::PATCH, q.to_owned(), json!({ "events": {} })),
        (
            Method::PUT,
            format!("{q}/schedules/nightly"),
            json!({ "cron": "30 2 * * *", "payload": "night" }),
        ),
    ] {
        let (status, body) = s.call(method, &path, Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{path}: {body}");
    }
    let (status, _) = s
        .post(
            &format!("{q}/messages"),
            json!({ "payload": 1, "delay": "1h" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert!(members(&s, "SMEMBERS", "dq:pushed").contains("retired"));
    assert!(members(&s, "HKEYS", "dq:webhooks").contains("retired"));
    let (_, text) = s.get_text("/metrics").await;
    assert!(
        text.contains("delayq_messages{queue=\"retired\",state=\"delayed\"} 1"),
        "{text}"
    );

    let before = queue_data_dumped(&s.redis);
    let refused = s.call(Method::DELETE, q, None).await;
    assert_error(&refused, StatusCode::CONFLICT, "queue_not_empty");
    assert_eq!(
        queue_data_dumped(&s.redis),
        before,
        "a refused delete wrote"
    );

    let (status, deleted) = s
        .call(Method::DELETE, &format!("{q}?force=true"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    assert_eq!(
        (&deleted["queue"], &deleted["messages"], &deleted["raced"]),
        (&json!("retired"), &json!(1), &json!(false))
    );
    assert!(deleted["keys"].as_u64() > Some(3), "{deleted}");
    let (_, list) = s.get("/v1/queues").await;
    assert!(!list.to_string().contains("\"retired\""), "{list}");
    assert!(!members(&s, "SMEMBERS", "dq:pushed").contains("retired"));
    assert!(!members(&s, "HKEYS", "dq:webhooks").contains("retired"));
    assert!(!members(&s, "SMEMBERS", "dq:scheduled").contains("retired"));
    let (status, _) = s.get(&format!("{q}/push")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, schedules) = s.get(&format!("{q}/schedules")).await;
    assert_eq!(schedules["schedules"], json!([]), "{schedules}");
    wait_until(Duration::from_secs(30), "its gauges to go", || async {
        !s.get_text("/metrics")
            .await
            .1
            .contains("queue=\"retired\",state=")
    })
    .await;

    // Deleted again: it is not there.
    let gone = s.call(Method::DELETE, q, None).await;
    assert_error(&gone, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn bad_deletes_have_clear_answers() {
    let s = TestServer::start().await;
    let never = s.call(Method::DELETE, "/v1/queues/never-used", None).await;
    assert_error(&never, StatusCode::NOT_FOUND, "not_found");
    let bad = s.call(Method::DELETE, "/v1/queues/bad%20name", None).await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_queue_name");
    s.post("/v1/queues/kept/messages", json!({ "payload": 1 }))
        .await;
    let query = s
        .call(Method::DELETE, "/v1/queues/kept?force=maybe", None)
        .await;
    assert_error(&query, StatusCode::BAD_REQUEST, "invalid_query");
    let (_, stats) = s.get("/v1/queues/kept").await;
    assert_eq!(stats["ready"], 1, "a refused delete kept the message");
}

/// Sends racing a delete without force: every message accepted is still there after, and
/// the delete either refused (409) or finished with the queue started again (`raced`).
#[tokio::test]
async fn sends_racing_a_delete_keep_every_accepted_message() {
    let s = TestServer::start().await;
    // 1,200 schedules make the delete several calls long.
    for i in 0..1200 {
        let body = json!({ "every": "1d", "payload": "t" });
        let (status, _) = s
            .call(
                Method::PUT,
                &format!("/v1/queues/contested/schedules/s{i}"),
                Some(body),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let sends = async {
        let mut accepted = 0u64;
        for i in 0..200 {
            let (status, _) = s
                .post("/v1/queues/contested/messages", json!({ "payload": i }))
                .await;
            if status == StatusCode::CREATED {
                accepted += 1;
            }
        }
        accepted
    };
    let delete = s.call(Method::DELETE, "/v1/queues/contested", None);
    let (accepted, (status, answer)) = tokio::join!(sends, delete);
    assert!(
        status == StatusCode::OK || status == StatusCode::CONFLICT,
        "{status}: {answer}"
    );
    let (_, stats) = s.get("/v1/queues/contested").await;
    assert_eq!(
        stats["ready"], accepted,
        "accepted {accepted}; after the delete: {stats}"
    );
    let (_, list) = s.get("/v1/queues").await;
    let listed = list.to_string().contains("\"contested\"");
    assert_eq!(
        listed,
        accepted > 0,
        "listed while it holds messages: {list}"
    );
}
