//! Bad input: every error has a status, a stable code and a JSON body; limits are enforced
//! before any work; names and ids cannot break out of the key space; refused settings create
//! nothing. A Redis that went away or is full: `redis_outages.rs`.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

#[tokio::test]
async fn bad_input_is_a_400_with_a_stable_code() {
    let s = TestServer::start().await;
    let raw = s
        .http
        .post(format!("{}/v1/queues/q/messages", s.base))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .expect("request");
    assert_error(&read(raw).await, StatusCode::BAD_REQUEST, "malformed_json");
    let cases = [
        (
            "/v1/queues/bad%20name/messages",
            json!({ "payload": 1 }),
            "invalid_queue_name",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "id": "a b" }),
            "invalid_id",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "id": "12-34" }),
            "invalid_id",
        ),
        ("/v1/queues/q/messages", json!({}), "invalid_payload"),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "payload_base64": "" }),
            "invalid_payload",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload_base64": "***" }),
            "invalid_payload",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "delay": "soon" }),
            "invalid_duration",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "deliver_at": "tomorrow" }),
            "invalid_time",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "delay": 1, "deliver_at": 1 }),
            "invalid_schedule",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "max_attempts": 0 }),
            "invalid_option",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "max_attempts": 70000 }),
            "invalid_option",
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "colour": "red" }),
            "malformed_json",
        ),
        (
            "/v1/queues/q/batch",
            json!({ "messages": [] }),
            "empty_batch",
        ),
        ("/v1/queues/q/receive", json!({ "max": 0 }), "empty_batch"),
        (
            "/v1/queues/q/ack",
            json!({ "receipt": "nonsense" }),
            "invalid_receipt",
        ),
        ("/v1/queues/q/ack", json!({}), "invalid_receipt"),
        ("/v1/queues/q/requeue", json!({}), "invalid_option"),
    ];
    for (path, body, code) in cases {
        let answer = s.post(path, body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let answer = s.get("/v1/queues/q/messages/has%20space").await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_id");
    let (_, stats) = s.get("/v1/queues/q").await;
    assert_eq!(stats["ready"], 0, "nothing was written");
}

#[tokio::test]
async fn unknown_things_are_404s_with_a_body() {
    let s = TestServer::start().await;
    assert_error(
        &s.get("/v1/queues/q/messages/nope").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &s.get("/no/such/route").await,
        StatusCode::NOT_FOUND,
        "no_route",
    );
    let answer = s
        .post("/v1/queues/q/requeue", json!({ "id": "nope" }))
        .await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
    let answer = s.post("/v1/queues/q/purge", json!({ "id": "nope" })).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn limits_are_enforced_before_any_work() {
    let limits = Limits {
        max_body_bytes: 64 * 1024,
        max_batch: 10,
        max_wait: Duration::from_secs(5),
        max_lease: Duration::from_secs(60),
        max_delay: Duration::from_secs(3600),
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    let big = "x".repeat(70 * 1024);
    assert_error(
        &s.post("/v1/queues/q/messages", json!({ "payload": big }))
            .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
    );
    let eleven: Vec<_> = (0..11).map(|i| json!({ "payload": i })).collect();
    assert_error(
        &s.post("/v1/queues/q/batch", json!({ "messages": eleven }))
            .await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "batch_too_large",
    );
    for (path, body) in [
        ("/v1/queues/q/receive", json!({ "wait": "6s" })),
        ("/v1/queues/q/receive", json!({ "lease": "2m" })),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "delay": "2h" }),
        ),
        (
            "/v1/queues/q/messages",
            json!({ "payload": 1, "deliver_at": "2099-01-01T00:00:00Z" }),
        ),
    ] {
        assert_error(
            &s.post(path, body).await,
            StatusCode::BAD_REQUEST,
            "over_limit",
        );
    }
    let (_, stats) = s.get("/v1/queues/q").await;
    assert_eq!(stats["ready"], 0, "nothing was written");
}

#[tokio::test]
async fn a_payload_over_the_library_limit_is_a_413() {
    let s = TestServer::start().await;
    let resp = s
        .http
        .post(format!("{}/v1/queues/q/messages", s.base))
        .header("content-type", "application/octet-stream")
        .body(vec![1u8; 1024 * 1024 + 1])
        .send()
        .await
        .expect("request");
    assert_error(
        &read(resp).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );
}

#[tokio::test]
async fn a_wrong_method_is_an_error_not_a_panic() {
    let s = TestServer::start().await;
    let answer = s.call(Method::PUT, "/v1/queues/q/messages", None).await;
    assert_error(
        &answer,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
}

/// Queue names and ids that try to reach another queue's keys (hash-tag braces, key
/// separators, glob characters, newlines, very long, not UTF-8) are refused on every route
/// that takes them, and the queue they aim at is untouched.
#[tokio::test]
async fn names_and_ids_cannot_break_out_of_the_key_space() {
    let s = TestServer::start().await;
    let (status, _) = s
        .post(
            "/v1/queues/orders/messages",
            json!({ "payload": 1, "id": "close-1", "delay": "1h" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let keys_before = all_keys(&s.redis);

    let long_name = "q".repeat(65);
    let names = [
        "%7Borders%7D",   // {orders}: the victim's hash tag
        "orders%7D",      // orders}
        "%7B",            // {
        "orders:pending", // a key separator
        "dq:%7Borders%7D:pending",
        "*",
        "orders*",
        "orders%0A",        // newline
        "orders%0D%0APING", // an inline command
        "orders%00",
        "%FF%FE", // not UTF-8
        "%C3%A9", // é: UTF-8, but not in the alphabet
        long_name.as_str(),
    ];
    for name in names {
        let q = format!("/v1/queues/{name}");
        let calls = [
            (
                Method::POST,
                format!("{q}/messages"),
                Some(json!({ "payload": 1 })),
            ),
            (
                Method::POST,
                format!("{q}/batch"),
                Some(json!({ "messages": [{ "payload": 1 }] })),
            ),
            (Method::GET, format!("{q}/messages/close-1"), None),
            (Method::DELETE, format!("{q}/messages/close-1"), None),
            (
                Method::POST,
                format!("{q}/messages/close-1/reschedule"),
                Some(json!({ "delay": 0 })),
            ),
            (
                Method::POST,
                format!("{q}/receive"),
                Some(json!({ "max": 10 })),
            ),
            (Method::GET, q.clone(), None),
            (Method::GET, format!("{q}/dead"), None),
            (
                Method::POST,
                format!("{q}/purge"),
                Some(json!({ "all": true })),
            ),
            (
                Method::POST,
                format!("{q}/requeue"),
                Some(json!({ "all": true })),
            ),
        ];
        for (method, path, body) in calls {
            let answer = s.call(method.clone(), &path, body).await;
            assert_eq!(
                answer.1["error"]["code"], "invalid_queue_name",
                "{method} {path}"
            );
            assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_queue_name");
        }
    }

    let long_id = "i".repeat(129);
    let ids = [
        "%7Borders%7D",
        "close-1*",
        "close-*",
        "close-1%0A",
        "close-1%0D%0AFLUSHALL",
        "%FF",
        "close%201",
        long_id.as_str(),
    ];
    for id in ids {
        let m = format!("/v1/queues/orders/messages/{id}");
        for (method, path, body) in [
            (Method::GET, m.clone(), None),
            (Method::DELETE, m.clone(), None),
            (
                Method::POST,
                format!("{m}/reschedule"),
                Some(json!({ "delay": 0 })),
            ),
        ] {
            let answer = s.call(method.clone(), &path, body).await;
            assert_eq!(answer.1["error"]["code"], "invalid_id", "{method} {path}");
            assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_id");
        }
        let decoded = percent_decode(id);
        let answer = s
            .post(
                "/v1/queues/orders/messages",
                json!({ "payload": 1, "id": decoded }),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_id");
    }

    assert_eq!(
        all_keys(&s.redis),
        keys_before,
        "a refused request wrote a key"
    );
    let (status, message) = s.get("/v1/queues/orders/messages/close-1").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(message["state"], "delayed", "{message}");
}

/// A refused change of settings writes nothing: the queue it names is not created (not
/// listed, its partition count not pinned to 1).
#[tokio::test]
async fn refused_settings_create_no_queue() {
    let s = TestServer::start().await;
    let before = all_keys(&s.redis);
    for settings in [
        json!({ "rate_limit": { "per_second": 0 } }),
        json!({ "rate_limit": { "per_second": 5, "burst": 0 } }),
        json!({ "idempotency_window": "400days" }),
        json!({ "idempotency_window": "1h", "rate_limit": { "per_second": 0 } }),
    ] {
        let answer = s
            .call(Method::PATCH, "/v1/queues/fresh", Some(settings.clone()))
            .await;
        assert_eq!(
            answer.0,
            StatusCode::BAD_REQUEST,
            "{settings}: {}",
            answer.1
        );
        assert_eq!(all_keys(&s.redis), before, "{settings} wrote a key");
    }
    // Other refusals (a 400 or a 404) on a queue never used write nothing either.
    let receipt = "0123456789abcdef01234567gnope";
    for (method, path, body) in [
        (
            Method::PUT,
            "/v1/queues/fresh",
            Some(json!({ "partitions": 0 })),
        ),
        (
            Method::PUT,
            "/v1/queues/fresh",
            Some(json!({ "partitions": 300 })),
        ),
        (
            Method::PUT,
            "/v1/queues/fresh/schedules/s",
            Some(json!({ "cron": "not a cron", "payload": 1 })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/requeue",
            Some(json!({ "id": "nope" })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/purge",
            Some(json!({ "id": "nope" })),
        ),
        (Method::DELETE, "/v1/queues/fresh/messages/nope", None),
        (
            Method::POST,
            "/v1/queues/fresh/messages/nope/reschedule",
            Some(json!({ "delay": "1s" })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/ack",
            Some(json!({ "receipt": receipt })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/nack",
            Some(json!({ "receipt": receipt })),
        ),
        (
            Method::POST,
            "/v1/queues/fresh/messages",
            Some(json!({ "payload": 1, "priority": 10 })),
        ),
        (Method::DELETE, "/v1/queues/fresh/schedules/s", None),
    ] {
        let answer = s.call(method.clone(), path, body).await;
        assert!(
            answer.0.is_client_error(),
            "{method} {path}: {} {}",
            answer.0,
            answer.1
        );
        assert_eq!(all_keys(&s.redis), before, "{method} {path} wrote a key");
    }
    let (_, listed) = s.get("/v1/queues").await;
    assert_eq!(listed["queues"], json!([]), "{listed}");
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/fresh",
            Some(json!({ "partitions": 4 })),
        )
        .await;
    assert_eq!(
        (status, &body["partitions"]),
        (StatusCode::OK, &json!(4)),
        "{body}"
    );
}

/// `%XX` escapes decoded (lossily: an id that is not UTF-8 cannot be JSON anyway).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match (
            bytes[i],
            s.get(i + 1..i + 3)
                .and_then(|h| u8::from_str_radix(h, 16).ok()),
        ) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A queue whose data a newer delayq wrote (a newer format) is refused by this server with
/// a clear 503, and nothing is written.
#[tokio::test]
async fn a_queue_of_a_newer_data_format_is_refused_with_503() {
    let s = TestServer::start().await;
    s.post("/v1/queues/q/messages", json!({ "payload": 1, "id": "a" }))
        .await;
    let newer = (delayq::DATA_FORMAT + 1).to_string();
    s.redis.cli(&["HSET", "dq:{q}:control", "format", &newer]);
    // A server that starts after a newer delayq upgraded the queue (one running before
    // would have held the upgrade up: tests/server/formats.rs).
    let late = s.start_beside(Limits::default()).await;
    let before = all_keys(&s.redis);
    let answer = late
        .post("/v1/queues/q/messages", json!({ "payload": 2 }))
        .await;
    assert_error(
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "newer_data_format",
    );
    let message = answer.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&format!("format {newer}")), "{message}");
    assert!(message.contains("upgrade"), "{message}");
    assert_eq!(
        all_keys(&s.redis),
        before,
        "the refused send wrote something"
    );
    late.shutdown().await;
}
