//! Push delivery that looks ahead (`delayq serve --look-ahead`), over real HTTP against the
//! binary: a message is taken before its due time (in flight: a cancel answers 409
//! `wrong_state`) and pushed at its due time, never before.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;
use crate::receiver::Receiver;
use crate::serve::Serve;

#[tokio::test]
async fn a_message_taken_ahead_is_in_flight_and_pushed_at_its_due_time() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    let url = redis.url();
    let args = [
        "--redis-url",
        url.as_str(),
        "--push-allow",
        "127.0.0.0/8",
        "--look-ahead",
        "1s",
    ];
    let serve = Serve::start(&args, &[]).await;
    let target = json!({ "url": format!("{}/hook", receiver.url) });
    let put = serve
        .http
        .put(format!("{}/v1/queues/ahead/push", serve.base))
        .json(&target)
        .send()
        .await
        .expect("put target");
    assert_eq!(put.status(), StatusCode::OK);
    // The server's pushing worker starts once it has read the target: a first push says so.
    let (status, sent) = serve
        .post(
            "/v1/queues/ahead/messages",
            json!({ "payload": "first", "id": "first" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    wait_until(Duration::from_secs(10), "the first push", || async {
        !receiver.for_id("first").is_empty()
    })
    .await;
    let (status, sent) = serve
        .post(
            "/v1/queues/ahead/messages",
            json!({ "payload": "p", "id": "a", "delay": "700ms" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");

    // Taken within the look-ahead, before its due time: in flight, so not cancelled.
    wait_until(
        Duration::from_secs(5),
        "the message taken ahead",
        || async { serve.get("/v1/queues/ahead/messages/a").await.1["state"] == "in_flight" },
    )
    .await;
    let seen_ms = crate::receiver::now_ms();
    let due_ms = serve.get("/v1/queues/ahead/messages/a").await.1["due_ms"]
        .as_u64()
        .expect("due_ms");
    assert!(
        seen_ms < due_ms,
        "in flight only at {seen_ms}, due {due_ms}"
    );
    assert!(
        receiver.for_id("a").is_empty(),
        "pushed before its due time"
    );
    let cancel = serve
        .http
        .delete(format!("{}/v1/queues/ahead/messages/a", serve.base))
        .send()
        .await
        .expect("cancel");
    assert_eq!(cancel.status(), StatusCode::CONFLICT);
    let answer: serde_json::Value = cancel.json().await.expect("json");
    assert_eq!(answer["error"]["code"], "wrong_state", "{answer}");

    wait_until(Duration::from_secs(10), "the push", || async {
        !receiver.for_id("a").is_empty()
    })
    .await;
    let request = &receiver.for_id("a")[0];
    let due: u64 = request.header("delayq-due-ms").parse().expect("due ms");
    assert!(
        request.began_ms >= due,
        "pushed {} ms early",
        due - request.began_ms
    );
    wait_until(Duration::from_secs(5), "the ack", || async {
        serve.get("/v1/queues/ahead/messages/a").await.0 == StatusCode::NOT_FOUND
    })
    .await;
    serve.kill();
}
