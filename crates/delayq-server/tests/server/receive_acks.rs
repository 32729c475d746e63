//! A receive that acks what the client finished (`"acks"`: receipts): each is acked as by
//! `ack`, before the receive waits, and the answer says how each went. Bad receipts are
//! refused with nothing acked; a receive over several queues takes no acks.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

async fn send(s: &TestServer, queue: &str, payload: Value) {
    let (status, sent) = s
        .post(
            &format!("/v1/queues/{queue}/messages"),
            json!({ "payload": payload }),
        )
        .await;
    assert!(status.is_success(), "{status}: {sent}");
}

fn receipts(deliveries: &[Value]) -> Vec<Value> {
    deliveries.iter().map(|d| d["receipt"].clone()).collect()
}

fn oks(body: &Value) -> Vec<bool> {
    body["acked"]
        .as_array()
        .expect("acked")
        .iter()
        .map(|r| r["ok"] == true)
        .collect()
}

async fn counts(s: &TestServer, queue: &str) -> (u64, u64) {
    let (_, stats) = s.get(&format!("/v1/queues/{queue}")).await;
    (
        stats["ready"].as_u64().unwrap_or(u64::MAX),
        stats["in_flight"].as_u64().unwrap_or(u64::MAX),
    )
}

#[tokio::test]
async fn a_receive_acks_what_the_client_finished_and_says_how_each_went() {
    let s = TestServer::start().await;
    for i in 0..4 {
        send(&s, "work", json!(i)).await;
    }
    let first = receive(&s, "work", 2, "0s").await;
    assert_eq!(first.len(), 2);
    let mut acks = receipts(&first);
    // One already acked on its own: its ack with the receive answers false, as a second ack.
    let (status, _) = s
        .post("/v1/queues/work/ack", json!({ "receipt": acks[1] }))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    acks.swap(0, 1);
    let (status, body) = s
        .post("/v1/queues/work/receive", json!({ "max": 2, "acks": acks }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(oks(&body), [false, true]);
    assert_eq!(body["acked"][1]["receipt"], acks[1]);
    let second = body["deliveries"].as_array().expect("deliveries").clone();
    assert_eq!(second.len(), 2);
    assert_eq!(counts(&s, "work").await, (0, 2), "the first two are gone");

    // Without acks the answer has no `acked`; acks and nothing left to receive still ack.
    let (_, body) = s
        .post(
            "/v1/queues/work/receive",
            json!({ "acks": receipts(&second) }),
        )
        .await;
    assert_eq!(oks(&body), [true, true]);
    assert_eq!(body["deliveries"], json!([]));
    assert_eq!(counts(&s, "work").await, (0, 0));
    let (_, body) = s.post("/v1/queues/work/receive", json!({})).await;
    assert!(body.get("acked").is_none(), "{body}");
}

#[tokio::test]
async fn acks_go_before_the_receive_waits_on_every_partition() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/parted",
            Some(json!({ "partitions": 3 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    for i in 0..9 {
        send(&s, "parted", json!(i)).await;
    }
    let got = receive(&s, "parted", 9, "0s").await;
    assert_eq!(got.len(), 9);
    // Another long poll waits already (Redis ran its claim on each of the 3 partitions): its
    // claims tell the server's other receives that nothing is due, so the receive with acks
    // makes no claim for them to go with.
    let other = long_poll_claimed(
        &s,
        "/v1/queues/parted/receive",
        json!({ "wait": "3s" }),
        "parted",
        3,
    )
    .await;
    // A receive that waits 3 s on the empty queue: its acks are made all the same, long
    // before its wait ends.
    let started = Instant::now();
    let waiting = async {
        s.post(
            "/v1/queues/parted/receive",
            json!({ "acks": receipts(&got), "wait": "3s" }),
        )
        .await
    };
    let watch = async {
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if counts(&s, "parted").await == (0, 0) {
                return Some(started.elapsed());
            }
            if Instant::now() > deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let ((status, body), acked_within, _) = tokio::join!(waiting, watch, other);
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(oks(&body), [true; 9]);
    assert!(
        acked_within.is_some(),
        "the acks waited for the receive's wait"
    );
}

#[tokio::test]
async fn bad_acks_are_refused_with_nothing_acked() {
    let s = TestServer::start().await;
    send(&s, "work", json!(1)).await;
    let got = receive(&s, "work", 1, "0s").await;
    let good = got[0]["receipt"].clone();
    for acks in [
        json!([good, "not-a-receipt"]),
        json!("one"),
        json!([good, 7]),
    ] {
        let answer = s
            .post("/v1/queues/work/receive", json!({ "acks": acks }))
            .await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{acks}: {}", answer.1);
    }
    let too_many = vec![good.clone(); 1001];
    let answer = s
        .post("/v1/queues/work/receive", json!({ "acks": too_many }))
        .await;
    assert_error(&answer, StatusCode::PAYLOAD_TOO_LARGE, "batch_too_large");
    // Receipts name no queue: a receive over several takes none.
    let answer = s
        .post("/v1/receive", json!({ "queues": ["work"], "acks": [good] }))
        .await;
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{}", answer.1);
    assert_eq!(counts(&s, "work").await, (0, 1), "still held");
    let (status, _) = s
        .post("/v1/queues/work/ack", json!({ "receipt": good }))
        .await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "the lease was never touched"
    );
}
