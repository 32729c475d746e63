//! Failure callbacks, against real receivers: a few at a time however many messages die at
//! once, and all of them sent; sent whoever found the death (a pull consumer's claim too);
//! never to an address the server may not reach, however the target was set.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{DelayQ, QueueSet, ReceiveOptions};
use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::push::callbacks::CONCURRENCY;
use delayq_server::push::target::{self, PushTarget};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::{Answer, Receiver};

fn allowing(network: &str) -> Limits {
    Limits {
        push_allow: vec![network.parse().expect("network")],
        ..Limits::default()
    }
}

/// A target as `delayq push set` stores it: straight into Redis, with no address checks
/// (the CLI does not know the servers' policy).
async fn save_directly(redis: &RedisServer, queue: &str, url: String, callback: String) {
    let dq = DelayQ::connect(&redis.url()).await.expect("connect");
    let q = dq.queue(queue).expect("queue");
    let target = PushTarget {
        url,
        method: "POST".into(),
        headers: BTreeMap::new(),
        timeout_ms: 2_000,
        concurrency: 4,
        signing_keys: vec!["0123456789abcdef0123".into()],
        dead_statuses: None,
        failure_callback: Some(callback),
        follow_redirects: false,
        allow_message_urls: Vec::new(),
    };
    target::save(&dq, &q, &target).await.expect("save");
}

fn callbacks(receiver: &Receiver) -> Vec<crate::receiver::Seen> {
    receiver
        .seen()
        .into_iter()
        .filter(|r| r.path == "/failed")
        .collect()
}

#[tokio::test]
async fn many_deaths_at_once_call_back_a_few_at_a_time_and_every_one_arrives() {
    let s = TestServer::start_with(allowing("127.0.0.0/8"), Tokens::default()).await;
    let receiver = Receiver::start().await;
    receiver.answer_path("/hook", Answer::Status(410, vec![], "gone".into()));
    receiver.answer_path("/failed", Answer::Hang(Duration::from_millis(300)));
    let target = json!({ "url": format!("{}/hook", receiver.url), "concurrency": 50,
        "failure_callback": format!("{}/failed", receiver.url) });
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/doomed/push", Some(target))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let batch: Vec<Value> = (0..100)
        .map(|i| json!({ "payload": i, "id": format!("d{i}"), "max_attempts": 1 }))
        .collect();
    let (status, body) = s
        .post("/v1/queues/doomed/batch", json!({ "messages": batch }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    wait_until(Duration::from_secs(60), "100 callbacks", || async {
        callbacks(&receiver).len() >= 100
    })
    .await;
    let most = receiver.max_concurrent_on("/failed");
    assert!(
        most <= CONCURRENCY,
        "{most} callbacks at once (at most {CONCURRENCY})"
    );
    let mut ids: Vec<String> = callbacks(&receiver)
        .iter()
        .map(|r| r.header("delayq-message-id").to_owned())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 100, "each dead letter called back once");
}

#[tokio::test]
async fn a_death_found_by_a_pull_consumers_claim_is_called_back() {
    let redis = RedisServer::start();
    // The server may reach 127.0.0.2 (the callback) but not 127.0.0.1 (the target): it runs
    // no push worker for the queue, so only pull consumers claim from it.
    let callback = Receiver::start_on("127.0.0.2").await;
    save_directly(
        &redis,
        "found",
        "http://127.0.0.1:9/hook".into(),
        format!("{}/failed", callback.url),
    )
    .await;
    let s = TestServer::start_on(redis, allowing("127.0.0.2/32"), Tokens::default()).await;
    let (status, body) = s
        .post(
            "/v1/queues/found/messages",
            json!({ "payload": 1, "id": "lost", "max_attempts": 1 }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // A pushing server takes it and dies mid-request: its lease runs out on the last attempt.
    let dq = DelayQ::connect(&s.redis.url()).await.expect("connect");
    let q = dq.queue("found").expect("queue");
    let mut pusher = QueueSet::single(q)
        .pushing()
        .consumer()
        .await
        .expect("consumer");
    let options = ReceiveOptions {
        max: 1,
        lease: Duration::from_millis(200),
        wait: Duration::from_secs(5),
    };
    assert_eq!(pusher.receive(&options).await.expect("claim").len(), 1);
    drop(pusher);
    // An HTTP consumer's claim finds the lease passed and makes the message a dead letter.
    wait_until(Duration::from_secs(10), "the dead letter", || async {
        receive(&s, "found", 1, "0s").await;
        s.get("/v1/queues/found/messages/lost").await.1["state"] == "dead"
    })
    .await;
    wait_until(Duration::from_secs(10), "the callback", || async {
        !callbacks(&callback).is_empty()
    })
    .await;
    let sent = &callbacks(&callback)[0];
    assert_eq!(sent.header("delayq-message-id"), "lost");
    let report: Value = serde_json::from_slice(&sent.body).expect("JSON");
    assert_eq!(report["error"], "lease expired", "{report}");
}

#[tokio::test]
async fn a_callback_on_a_refused_address_is_never_called() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    receiver.answer_path("/hook", Answer::Status(410, vec![], "gone".into()));
    let callback = Receiver::start_on("127.0.0.2").await;
    // Set as the CLI sets it, unchecked; the server may reach 127.0.0.1 only.
    save_directly(
        &redis,
        "refq",
        format!("{}/hook", receiver.url),
        format!("{}/failed", callback.url),
    )
    .await;
    let s = TestServer::start_on(redis, allowing("127.0.0.1/32"), Tokens::default()).await;
    let (status, body) = s
        .post(
            "/v1/queues/refq/messages",
            json!({ "payload": 1, "id": "r", "max_attempts": 1 }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let refused = |text: &str| {
        text.lines().any(|l| {
            l.starts_with("delayq_push_callbacks_total")
                && l.contains("queue=\"refq\"")
                && l.contains("outcome=\"refused\"")
        })
    };
    wait_until(Duration::from_secs(10), "the refused callback", || async {
        let (_, metrics) = s.get_text("/metrics").await;
        refused(&metrics) || !callback.seen().is_empty()
    })
    .await;
    assert!(
        callback.seen().is_empty(),
        "a callback went to an address the server may not reach"
    );
    // Set through the API, the same callback is refused at once.
    let answer = s
        .call(
            Method::PUT,
            "/v1/queues/refq/push",
            Some(json!({ "url": format!("{}/hook", receiver.url),
                "failure_callback": format!("{}/failed", callback.url) })),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "push_target_refused");
}
