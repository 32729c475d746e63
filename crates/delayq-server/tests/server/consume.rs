//! Consuming over HTTP: receive with long-poll, ack, nack, extend, release by receipt; many
//! long-polls on one connection budget; shutdown answers held long-polls; the close-unpaid-
//! order flow end to end.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

async fn send(s: &TestServer, queue: &str, body: Value) -> Value {
    let (status, sent) = s.post(&format!("/v1/queues/{queue}/messages"), body).await;
    assert!(status.is_success(), "{status}: {sent}");
    sent
}

#[tokio::test]
async fn ack_by_receipt_and_a_stale_receipt_is_a_conflict() {
    let s = TestServer::start().await;
    send(&s, "work", json!({ "payload": 1 })).await;
    let got = receive(&s, "work", 1, "0s").await;
    let receipt = got[0]["receipt"].clone();
    assert_eq!(got[0]["attempt"], 1);
    let (status, body) = s
        .post("/v1/queues/work/ack", json!({ "receipt": receipt }))
        .await;
    assert_eq!((status, body), (StatusCode::NO_CONTENT, Value::Null));
    let again = s
        .post("/v1/queues/work/ack", json!({ "receipt": receipt }))
        .await;
    assert_error(&again, StatusCode::CONFLICT, "lease_lost");
    let (_, stats) = s.get("/v1/queues/work").await;
    assert_eq!(
        (stats["ready"].as_u64(), stats["in_flight"].as_u64()),
        (Some(0), Some(0))
    );
}

#[tokio::test]
async fn many_receipts_get_one_result_each() {
    let s = TestServer::start().await;
    for i in 0..3 {
        send(&s, "many", json!({ "payload": i })).await;
    }
    let got = receive(&s, "many", 3, "0s").await;
    let receipts: Vec<Value> = got.iter().map(|d| d["receipt"].clone()).collect();
    s.post("/v1/queues/many/ack", json!({ "receipt": receipts[0] }))
        .await;
    let (status, body) = s
        .post(
            "/v1/queues/many/extend",
            json!({ "receipts": receipts, "lease": "1m" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let oks: Vec<bool> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["ok"] == true)
        .collect();
    assert_eq!(oks, [false, true, true]);
    assert!(body["results"][1]["lease_deadline_ms"].as_u64().is_some());
    let (status, body) = s
        .post(
            "/v1/queues/many/release",
            json!({ "receipts": receipts[1..] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let again = receive(&s, "many", 3, "0s").await;
    assert_eq!(again.len(), 2, "released messages are ready at once");
    assert!(
        again.iter().all(|d| d["attempt"] == 1),
        "a release does not count the attempt"
    );
}

#[tokio::test]
async fn nack_retries_by_backoff_then_dead_letters() {
    let s = TestServer::start().await;
    let body = json!({ "payload": "x", "id": "flaky", "max_attempts": 2, "backoff": { "fixed": { "delay": "100ms" } } });
    send(&s, "retry", body).await;
    let got = receive(&s, "retry", 1, "0s").await;
    let (status, body) = s
        .post(
            "/v1/queues/retry/nack",
            json!({ "receipt": got[0]["receipt"], "error": "upstream 502" }),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "outcome": "retry" }))
    );
    let got = receive(&s, "retry", 1, "5s").await;
    assert_eq!(got[0]["attempt"], 2);
    let (_, body) = s
        .post(
            "/v1/queues/retry/nack",
            json!({ "receipt": got[0]["receipt"], "error": "still 502" }),
        )
        .await;
    assert_eq!(body, json!({ "outcome": "dead" }));
    let (status, dead) = s.get("/v1/queues/retry/dead").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(dead["total"], 1);
    assert_eq!(dead["dead_letters"][0]["last_error"], "still 502");
    let history: Vec<(u64, &str)> = dead["dead_letters"][0]["errors"]
        .as_array()
        .map(|errors| {
            errors
                .iter()
                .filter_map(|e| Some((e["attempt"].as_u64()?, e["error"].as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(history, [(1, "upstream 502"), (2, "still 502")]);
    assert_eq!(dead["dead_letters"][0]["payload"], "x");
    let (_, body) = s
        .post("/v1/queues/retry/requeue", json!({ "id": "flaky" }))
        .await;
    assert_eq!(body, json!({ "count": 1 }));
    let got = receive(&s, "retry", 1, "0s").await;
    assert_eq!(
        (got[0]["id"].as_str(), got[0]["attempt"].as_u64()),
        (Some("flaky"), Some(1))
    );
    s.post(
        "/v1/queues/retry/nack",
        json!({ "receipt": got[0]["receipt"], "retry_after": "1h" }),
    )
    .await;
    let (_, info) = s.get("/v1/queues/retry/messages/flaky").await;
    assert_eq!(info["state"], "delayed");
    assert_eq!(info["last_error"], "failed");
}

/// Linear and listed backoffs over HTTP: each nack puts the message as far out as its policy
/// says (checked against the host clock, which the local Redis shares).
#[tokio::test]
async fn linear_and_list_backoffs_space_retries_as_sent() {
    let s = TestServer::start().await;
    let cases = [
        (
            json!({ "linear": { "base": "10s", "cap": "25s" } }),
            [10_000, 20_000, 25_000],
        ),
        (
            json!({ "list": { "delays": ["30s", "2m"] } }),
            [30_000, 120_000, 120_000],
        ),
    ];
    for (i, (backoff, expected)) in cases.into_iter().enumerate() {
        let (q, id) = (format!("spaced{i}"), format!("b{i}"));
        send(
            &s,
            &q,
            json!({ "payload": 1, "id": id, "backoff": backoff }),
        )
        .await;
        for delay in expected {
            let got = receive(&s, &q, 1, "0s").await;
            assert_eq!(got[0]["id"], id.as_str());
            let before = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0);
            let (_, body) = s
                .post(
                    &format!("/v1/queues/{q}/nack"),
                    json!({ "receipt": got[0]["receipt"] }),
                )
                .await;
            assert_eq!(
                body,
                json!({ "outcome": "retry" }),
                "{id}, retry after {delay} ms"
            );
            let (_, info) = s.get(&format!("/v1/queues/{q}/messages/{id}")).await;
            let due = info["due_ms"].as_u64().unwrap_or(0);
            assert!(
                (before + delay..before + delay + 1000).contains(&due),
                "{id}: due {} ms after the nack, expected {delay}",
                due.saturating_sub(before)
            );
            let (status, moved) = s
                .post(
                    &format!("/v1/queues/{q}/messages/{id}/reschedule"),
                    json!({ "delay": 0 }),
                )
                .await;
            assert_eq!(status, StatusCode::OK, "{moved}");
        }
    }
    let too_many = json!({ "payload": 1, "backoff": { "list": { "delays": vec!["1s"; 9] } } });
    let answer = s.post("/v1/queues/spaced/messages", too_many).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
}

#[tokio::test]
async fn a_nack_can_dead_letter_at_once() {
    let s = TestServer::start().await;
    send(
        &s,
        "permanent",
        json!({ "payload": 1, "id": "p", "max_attempts": 5 }),
    )
    .await;
    let got = receive(&s, "permanent", 1, "0s").await;
    let receipt = got[0]["receipt"].clone();
    let both = json!({ "receipt": receipt, "dead": true, "retry_after": "1s" });
    let answer = s.post("/v1/queues/permanent/nack", both).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
    let (status, body) = s
        .post(
            "/v1/queues/permanent/nack",
            json!({ "receipt": receipt, "dead": true, "error": "malformed" }),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "outcome": "dead" }))
    );
    let (_, info) = s.get("/v1/queues/permanent/messages/p").await;
    assert_eq!(info["state"], "dead");
    assert_eq!(info["attempts"], 1);
    assert_eq!(info["last_error"], "malformed");
}

#[tokio::test]
async fn a_nack_can_replace_the_payload_and_grant_attempts() {
    let s = TestServer::start().await;
    let body = json!({ "payload": { "v": 1 }, "id": "m", "max_attempts": 2 });
    send(&s, "amended", body).await;
    let got = receive(&s, "amended", 1, "0s").await;
    let receipt = got[0]["receipt"].clone();
    let both = json!({ "receipt": receipt, "payload": 1, "payload_base64": "AA==" });
    let answer = s.post("/v1/queues/amended/nack", both).await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_payload");
    let nack =
        json!({ "receipt": receipt, "retry_after": 0, "payload": { "v": 2 }, "extra_attempts": 1 });
    let (_, body) = s.post("/v1/queues/amended/nack", nack).await;
    assert_eq!(body, json!({ "outcome": "retry" }));
    let (_, info) = s.get("/v1/queues/amended/messages/m").await;
    assert_eq!(info["max_attempts"], 3);
    let got = receive(&s, "amended", 1, "5s").await;
    assert_eq!(got[0]["payload"], json!({ "v": 2 }));
    assert_eq!(got[0]["attempt"], 2);
}

#[tokio::test]
async fn a_long_poll_is_woken_by_a_send() {
    let s = TestServer::start().await;
    let polling = long_poll_waiting(
        &s,
        "/v1/queues/poll/receive",
        json!({ "wait": "10s" }),
        "poll",
    )
    .await;
    let sent_at = Instant::now();
    let sent = send(&s, "poll", json!({ "payload": "wake up" })).await;
    let ((status, body), took) = polling.await.expect("poll task");
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["deliveries"][0]["id"], sent["id"]);
    assert!(
        took < Duration::from_secs(10),
        "answered by the send, not the wait"
    );
    println!("long-poll answered {:?} after the send", sent_at.elapsed());
}

#[tokio::test]
async fn many_long_polls_share_one_redis_connection_budget() {
    let s = TestServer::start().await;
    let clients = |s: &TestServer| s.redis.cli(&["CLIENT", "LIST"]).lines().count();
    let n = 300;
    let mut polls = Vec::new();
    for _ in 0..n {
        let (base, http) = (s.base.clone(), s.http.clone());
        polls.push(tokio::spawn(async move {
            let resp = http
                .post(format!("{base}/v1/queues/crowd/receive"))
                .json(&json!({ "wait": "20s" }))
                .send()
                .await
                .expect("request");
            read(resp).await
        }));
    }
    wait_until(
        Duration::from_secs(10),
        "the long-polls to wait",
        || async {
            s.redis
                .cli(&["PUBSUB", "SHARDNUMSUB", "dq:{crowd}:wake"])
                .lines()
                .nth(1)
                == Some("1")
        },
    )
    .await;
    let connections = clients(&s);
    assert!(
        connections <= 4,
        "{n} long-polls hold {connections} Redis connections"
    );
    let batch: Vec<Value> = (0..n).map(|i| json!({ "payload": i })).collect();
    s.post("/v1/queues/crowd/batch", json!({ "messages": batch }))
        .await;
    let mut delivered = 0;
    for p in polls {
        let (status, body) = p.await.expect("poll task");
        assert_eq!(status, StatusCode::OK);
        delivered += body["deliveries"].as_array().map_or(0, Vec::len);
    }
    assert_eq!(delivered, n, "every long-poll got one message");
}

#[tokio::test]
async fn shutdown_answers_held_long_polls_empty() {
    let mut s = TestServer::start().await;
    let polling = long_poll_waiting(
        &s,
        "/v1/queues/bye/receive",
        json!({ "wait": "20s" }),
        "bye",
    )
    .await;
    s.begin_shutdown();
    let ((status, body), took) = polling.await.expect("poll task");
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "deliveries": [] }))
    );
    assert!(
        took < Duration::from_secs(20),
        "answered at shutdown, not at the end of its wait"
    );
    s.join().await;
}

#[tokio::test]
async fn close_unpaid_orders_end_to_end() {
    let s = TestServer::start().await;
    // Two orders placed; each schedules its own closing 300 ms later.
    for order in [1, 2] {
        let body = json!({ "payload": { "order": order }, "id": format!("close-{order}"), "delay": "300ms" });
        send(&s, "orders", body).await;
    }
    // Order 2 is paid: its closing is cancelled.
    let (status, _) = s
        .call(
            reqwest::Method::DELETE,
            "/v1/queues/orders/messages/close-2",
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // The closer long-polls and gets only order 1, once it is due.
    let got = receive(&s, "orders", 10, "5s").await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["payload"], json!({ "order": 1 }));
    assert!(got[0]["due_ms"].as_u64() <= Some(now_ms()));
    let (status, _) = s
        .post(
            "/v1/queues/orders/ack",
            json!({ "receipt": got[0]["receipt"] }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert!(receive(&s, "orders", 10, "500ms").await.is_empty());
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[tokio::test]
async fn one_receive_serves_several_queues_strictly_or_by_weight() {
    let s = TestServer::start().await;
    send(&s, "low", json!({ "payload": "l" })).await;
    send(&s, "high", json!({ "payload": "h" })).await;

    // Strict: the first queue listed goes first; each delivery names its queue.
    let (status, body) = s
        .post(
            "/v1/receive",
            json!({ "queues": ["high", "low"], "max": 1, "wait": "1s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deliveries"][0]["queue"], "high");
    assert_eq!(body["deliveries"][0]["payload"], "h");
    let (status, _) = s
        .post(
            "/v1/queues/high/ack",
            json!({ "receipt": body["deliveries"][0]["receipt"] }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // Weighted: what is due on any of the queues.
    let weighted = json!({ "weights": { "low": 1, "mid": 5 }, "max": 5, "wait": "20s" });
    let (status, body) = s.post("/v1/receive", weighted.clone()).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deliveries"][0]["queue"], "low");
    assert_eq!(body["deliveries"].as_array().map(Vec::len), Some(1));

    // As a long-poll: a send to a queue that was empty answers it (unheard, it would
    // answer empty after 20 s).
    let polling = long_poll_waiting(&s, "/v1/receive", weighted.clone(), "mid").await;
    send(&s, "mid", json!({ "payload": "m" })).await;
    let ((status, body), _) = polling.await.expect("long-poll");
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deliveries"][0]["queue"], "mid");
    assert_eq!(body["deliveries"][0]["payload"], "m");

    // Bad sets are refused before anything is claimed.
    for (bad, code) in [
        (
            json!({ "queues": ["a"], "weights": { "a": 1 } }),
            "invalid_option",
        ),
        (json!({}), "invalid_option"),
        (json!({ "queues": [] }), "invalid_option"),
        (json!({ "queues": ["a", "a"] }), "invalid_option"),
        (json!({ "weights": { "a": 0 } }), "invalid_option"),
        (json!({ "queues": ["bad name"] }), "invalid_queue_name"),
    ] {
        let answer = s.post("/v1/receive", bad.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
}

#[tokio::test]
async fn a_message_sent_with_a_handler_timeout_is_delivered_with_it() {
    let s = TestServer::start().await;
    send(
        &s,
        "timed",
        json!({ "payload": 1, "id": "t1", "handler_timeout": "90s" }),
    )
    .await;
    send(&s, "timed", json!({ "payload": 2, "id": "t2" })).await;
    let got = receive(&s, "timed", 2, "0s").await;
    let by_id = |id: &str| {
        got.iter()
            .find(|d| d["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(by_id("t1")["handler_timeout_ms"], 90_000);
    assert!(by_id("t2").get("handler_timeout_ms").is_none(), "{got:?}");
    // Through a nack and back, it stays with the message.
    let (status, _) = s
        .post(
            "/v1/queues/timed/nack",
            json!({ "receipt": by_id("t1")["receipt"], "error": "again", "retry_after": "0s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let again = receive(&s, "timed", 1, "5s").await;
    assert_eq!(
        (&again[0]["id"], &again[0]["handler_timeout_ms"]),
        (&json!("t1"), &json!(90_000))
    );

    let answer = s
        .post(
            "/v1/queues/timed/messages",
            json!({ "payload": 1, "handler_timeout": "0s" }),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
}

#[tokio::test]
async fn higher_priorities_are_delivered_first_and_carry_their_priority() {
    let s = TestServer::start().await;
    send(
        &s,
        "prio",
        json!({ "payload": "low", "id": "low", "priority": 0 }),
    )
    .await;
    send(&s, "prio", json!({ "payload": "plain", "id": "plain" })).await;
    send(
        &s,
        "prio",
        json!({ "payload": "high", "id": "high", "priority": 9 }),
    )
    .await;
    let got = receive(&s, "prio", 10, "0s").await;
    let order: Vec<(&Value, &Value)> = got.iter().map(|d| (&d["id"], &d["priority"])).collect();
    assert_eq!(
        order,
        [
            (&json!("high"), &json!(9)),
            (&json!("plain"), &json!(5)),
            (&json!("low"), &json!(0)),
        ]
    );
    let (status, body) = s.get("/v1/queues/prio/messages/high").await;
    assert_eq!((status, &body["priority"]), (StatusCode::OK, &json!(9)));

    for bad in [json!(10), json!(-1), json!("high"), json!(1.5)] {
        let answer = s
            .post(
                "/v1/queues/prio/messages",
                json!({ "payload": 1, "priority": bad }),
            )
            .await;
        assert_eq!(
            answer.0,
            StatusCode::BAD_REQUEST,
            "priority {bad}: {answer:?}"
        );
    }
    let (_, stats) = s.get("/v1/queues/prio").await;
    assert_eq!(stats["ready"], 0, "a refused send wrote nothing: {stats}");
}
