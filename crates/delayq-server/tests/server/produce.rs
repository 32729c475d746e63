//! Producing over HTTP: sends (JSON and raw bytes), batches, duplicates, get, cancel,
//! reschedule, and payloads of every kind coming back as they went in.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn json_payloads_come_back_as_the_same_json() {
    let s = TestServer::start().await;
    let payloads = [
        json!({"order": 1234, "items": [1, 2], "note": "ünïcode"}),
        json!("a string"),
        json!(42.5),
        json!(null),
        json!([]),
    ];
    for p in &payloads {
        let (status, sent) = s
            .post("/v1/queues/kinds/messages", json!({ "payload": p }))
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
        let (status, got) = s
            .get(&format!(
                "/v1/queues/kinds/messages/{}",
                sent["id"].as_str().expect("id")
            ))
            .await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&got["payload"], p);
        assert!(got.get("payload_base64").is_none());
        assert_eq!(got["state"], "ready");
    }
    let got = receive(&s, "kinds", 10, "0s").await;
    let received: Vec<&Value> = got.iter().map(|d| &d["payload"]).collect();
    assert_eq!(received, payloads.iter().collect::<Vec<_>>());
}

#[tokio::test]
async fn bytes_round_trip_exactly_and_never_come_back_as_json() {
    let s = TestServer::start().await;
    let every_byte: Vec<u8> = (0..=255).collect();
    // A raw body: the bytes as they are.
    let resp = s
        .http
        .post(format!("{}/v1/queues/bytes/messages?id=raw-1", s.base))
        .header("content-type", "application/octet-stream")
        .body(every_byte.clone())
        .send()
        .await
        .expect("request");
    let (status, sent) = read(resp).await;
    assert_eq!(
        (status, sent["id"].as_str()),
        (StatusCode::CREATED, Some("raw-1"))
    );
    // Base64 in JSON, including an empty payload and bytes that happen to be JSON text.
    use base64::Engine;
    let b64 = |b: &[u8]| base64::engine::general_purpose::STANDARD.encode(b);
    for bytes in [&b""[..], br#"{"looks":"like json"}"#] {
        let (status, _) = s
            .post(
                "/v1/queues/bytes/messages",
                json!({ "payload_base64": b64(bytes) }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let got = receive(&s, "bytes", 10, "0s").await;
    let expected = [b64(&every_byte), b64(b""), b64(br#"{"looks":"like json"}"#)];
    for (d, want) in got.iter().zip(&expected) {
        assert!(d.get("payload").is_none(), "bytes came back as JSON: {d}");
        assert_eq!(d["payload_base64"], want.as_str());
    }
    assert_eq!(got.len(), 3);
}

#[tokio::test]
async fn a_duplicate_caller_id_answers_with_the_existing_message() {
    let s = TestServer::start().await;
    let body = json!({ "payload": {"order": 7}, "id": "close-7", "delay": "15m" });
    let (status, first) = s.post("/v1/queues/orders/messages", body.clone()).await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(
        (first["id"].as_str(), first["duplicate"].as_bool()),
        (Some("close-7"), Some(false))
    );
    let (status, again) = s.post("/v1/queues/orders/messages", body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["due_ms"], first["due_ms"]);
}

#[tokio::test]
async fn a_batch_is_sent_whole_or_not_at_all() {
    let s = TestServer::start().await;
    let good: Vec<Value> = (0..5)
        .map(|i| json!({ "payload": i, "delay": 60_000 }))
        .collect();
    let (status, body) = s
        .post("/v1/queues/batch/batch", json!({ "messages": good }))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["results"].as_array().map(Vec::len), Some(5));

    let mut bad = good.clone();
    bad.push(json!({ "payload": 1, "id": "has space" }));
    let answer = s
        .post("/v1/queues/batch/batch", json!({ "messages": bad }))
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_id");
    let (_, stats) = s.get("/v1/queues/batch").await;
    assert_eq!(stats["delayed"], 5, "nothing of the bad batch was written");
}

/// The batch route reads its messages as they are parsed (`batch_reader.rs`); what a client
/// is told must stay what parsing the whole body first would say: JSON of the wrong shape
/// anywhere, then a batch over the limit, then the first invalid message by its index.
#[tokio::test]
async fn a_bad_batch_is_refused_for_its_first_fault_in_a_fixed_order() {
    let limits = delayq_server::limits::Limits {
        max_batch: 3,
        ..delayq_server::limits::Limits::default()
    };
    let s = TestServer::start_with(limits, delayq_server::auth::Tokens::default()).await;
    let bad_delay = json!({ "payload": 1, "delay": "soon" });
    let unknown_field = json!({ "payload": 1, "colour": "red" });
    let ok = json!({ "payload": 1 });
    let cases = [
        // An unknown field after the limit and after an invalid message.
        (
            vec![
                bad_delay.clone(),
                ok.clone(),
                ok.clone(),
                ok.clone(),
                unknown_field,
            ],
            StatusCode::BAD_REQUEST,
            "malformed_json",
        ),
        (
            vec![ok.clone(), bad_delay.clone(), ok.clone(), ok.clone()],
            StatusCode::PAYLOAD_TOO_LARGE,
            "batch_too_large",
        ),
        (
            vec![ok.clone(), ok.clone(), bad_delay.clone()],
            StatusCode::BAD_REQUEST,
            "invalid_duration",
        ),
    ];
    for (messages, status, code) in cases {
        let answer = s
            .post("/v1/queues/order/batch", json!({ "messages": messages }))
            .await;
        assert_error(&answer, status, code);
    }
    let answer = s
        .post(
            "/v1/queues/order/batch",
            json!({ "messages": [ok, ok, bad_delay] }),
        )
        .await;
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("messages[2]: ")),
        "{}",
        answer.1
    );
    let answer = s
        .post(
            "/v1/queues/order/batch",
            json!({ "messages": (0..5).map(|i| json!({ "payload": i })).collect::<Vec<_>>() }),
        )
        .await;
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| m.ends_with("not 5")),
        "the error counts the whole batch: {}",
        answer.1
    );
    for body in [
        json!({}),
        json!({ "messages": [], "extra": 1 }),
        json!([ok]),
    ] {
        let answer = s.post("/v1/queues/order/batch", body).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "malformed_json");
    }
    let (_, stats) = s.get("/v1/queues/order").await;
    assert_eq!(stats["ready"], 0, "nothing was written");
}

#[tokio::test]
async fn cancel_and_reschedule_by_id() {
    let s = TestServer::start().await;
    for id in ["a", "b"] {
        s.post(
            "/v1/queues/later/messages",
            json!({ "payload": id, "id": id, "delay": "1h" }),
        )
        .await;
    }
    let (status, body) = s
        .call(Method::DELETE, "/v1/queues/later/messages/a", None)
        .await;
    assert_eq!(
        (status, body),
        (
            StatusCode::OK,
            json!({ "cancelled": true, "state": "delayed" })
        )
    );
    let answer = s
        .call(Method::DELETE, "/v1/queues/later/messages/a", None)
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");

    let at = "2030-01-01T00:00:00Z";
    let (status, body) = s
        .post(
            "/v1/queues/later/messages/b/reschedule",
            json!({ "deliver_at": at }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["due_ms"], 1_893_456_000_000u64);
    let (status, body) = s
        .post(
            "/v1/queues/later/messages/b/reschedule",
            json!({ "delay": 0 }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let got = receive(&s, "later", 1, "0s").await;
    assert_eq!(got[0]["id"], "b");
    let answer = s
        .call(Method::DELETE, "/v1/queues/later/messages/b", None)
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "wrong_state");
    let answer = s
        .post(
            "/v1/queues/later/messages/b/reschedule",
            json!({ "delay": "1s" }),
        )
        .await;
    assert_error(&answer, StatusCode::CONFLICT, "wrong_state");
    let answer = s
        .post(
            "/v1/queues/later/messages/zz/reschedule",
            json!({ "delay": "1s" }),
        )
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_delayed_message_is_delivered_when_due_not_before() {
    let s = TestServer::start().await;
    let (_, sent) = s
        .post(
            "/v1/queues/timed/messages",
            json!({ "payload": "x", "delay": "300ms" }),
        )
        .await;
    assert!(
        receive(&s, "timed", 1, "0s").await.is_empty(),
        "not yet due"
    );
    let started = std::time::Instant::now();
    let got = receive(&s, "timed", 1, "5s").await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], sent["id"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "delivered when due, not at the wait's end"
    );
}

/// RFC 3339 times with any offset and fraction of a second mean the instant they name
/// (expected values computed with Python's `datetime.fromisoformat`).
#[tokio::test]
async fn deliver_at_reads_any_rfc3339_offset() {
    let s = TestServer::start().await;
    let cases = [
        ("2030-01-01T10:00:00Z", 1_893_492_000_000u64),
        ("2030-01-01T10:00:00+02:00", 1_893_484_800_000),
        ("2030-01-01T10:00:00-05:00", 1_893_510_000_000),
        ("2030-01-01T10:00:00.5-03:30", 1_893_504_600_500),
        ("2030-01-01T10:00:00.123+05:45", 1_893_471_300_123),
        ("2030-01-01t10:00:00.123456789z", 1_893_492_000_123),
    ];
    for (i, (at, due_ms)) in cases.iter().enumerate() {
        let id = format!("m{i}");
        let (status, body) = s
            .post(
                "/v1/queues/tz/messages",
                json!({ "payload": 1, "id": id, "deliver_at": at }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{at}: {body}");
        assert_eq!(body["due_ms"], *due_ms, "{at}");
        let (status, body) = s
            .post(
                &format!("/v1/queues/tz/messages/{id}/reschedule"),
                json!({ "deliver_at": at }),
            )
            .await;
        assert_eq!(
            (status, &body["due_ms"]),
            (StatusCode::OK, &json!(due_ms)),
            "{at}"
        );
    }
    for bad in [
        "2030-01-01T10:00:00",
        "2030-01-01 10:00:00+25:00",
        "2030-02-30T10:00:00Z",
        "1969-12-31T23:59:59Z",
    ] {
        let answer = s
            .post(
                "/v1/queues/tz/messages",
                json!({ "payload": 1, "deliver_at": bad }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_time");
    }
}
