//! Bad input and failures: every error has a status, a stable code and a JSON body; limits
//! are enforced before any work; a Redis that went away is a quick 503, and the server
//! recovers when it is back.

use std::time::{Duration, Instant};

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
async fn a_redis_that_went_away_is_a_quick_503_then_the_server_recovers() {
    let mut s = TestServer::start().await;
    assert_eq!(s.get("/readyz").await.0, StatusCode::OK);
    s.redis.kill();
    let started = Instant::now();
    let answer = s
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    let took = started.elapsed();
    assert_error(
        &s.get("/readyz").await,
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
    );
    assert_eq!(
        s.get("/healthz").await.0,
        StatusCode::OK,
        "the process is up"
    );
    println!("503 after {took:?}");
    assert!(
        took < Duration::from_secs(10),
        "answered in {took:?}, not hung"
    );

    s.redis.restart();
    wait_until(
        Duration::from_secs(10),
        "the server to reach Redis again",
        || async { s.get("/readyz").await.0 == StatusCode::OK },
    )
    .await;
    let (status, _) = s
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test]
async fn a_redis_loading_its_data_is_not_ready_until_it_has_loaded() {
    // Redis's own test knob: each key read at start costs 1 ms, so that 3,000 of them keep
    // it loading for about 3 s (docs/operations.md, "Sizing", says /readyz fails while a
    // big data set loads); and it answers clients (LOADING) after every KB it reads, not
    // only every 2 MB, which this small data set would never reach.
    let mut config = ServerConfig::default();
    config.extra_args = [
        "--key-load-delay",
        "1000",
        "--loading-process-events-interval-bytes",
        "1024",
    ]
    .map(String::from)
    .to_vec();
    let mut s = TestServer::start_on(
        RedisServer::start_with(config),
        Limits::default(),
        Tokens::default(),
    )
    .await;
    let (status, _) = s
        .post("/v1/queues/q/messages", json!({ "payload": "kept" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    s.redis.cli(&[
        "EVAL",
        "for i = 1, 3000 do redis.call('SET', 'filler:' .. i, 'x') end",
        "0",
    ]);
    s.redis.cli(&["SAVE"]);
    s.redis.restart_loading();
    assert!(s.redis.is_loading(), "Redis loads its data again");
    let answer = s.get("/readyz").await;
    assert!(
        s.redis.is_loading(),
        "the check must be answered while Redis loads: make the data set bigger"
    );
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    wait_until(
        Duration::from_secs(30),
        "ready once Redis has loaded",
        || async { s.get("/readyz").await.0 == StatusCode::OK },
    )
    .await;
    let (status, stats) = s.get("/v1/queues/q").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        stats["ready"], 1,
        "the message sent before is there: {stats}"
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

#[tokio::test]
async fn a_long_poll_in_progress_when_redis_dies_answers_503_at_once() {
    let mut s = TestServer::start().await;
    let (base, http) = (s.base.clone(), s.http.clone());
    let polling = tokio::spawn(async move {
        let started = Instant::now();
        let resp = http
            .post(format!("{base}/v1/queues/q/receive"))
            .json(&json!({ "wait": "20s" }))
            .send()
            .await
            .expect("request");
        (read(resp).await, started.elapsed())
    });
    wait_until(Duration::from_secs(5), "the long-poll to wait", || async {
        s.redis
            .cli(&["PUBSUB", "SHARDNUMSUB", "dq:{q}:wake"])
            .lines()
            .nth(1)
            == Some("1")
    })
    .await;
    s.redis.kill();
    let (answer, took) = polling.await.expect("poll task");
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(
        took < Duration::from_secs(20),
        "answered when Redis died, not at the end of its wait"
    );
}

/// Redis down for 10 s in the middle of work: every call in that time answers 503 within the
/// configured Redis timeout (1 s here) plus a reconnect, never hangs; afterwards the server
/// carries on, and the message accepted before the outage is delivered.
#[tokio::test]
async fn redis_down_for_ten_seconds_is_quick_503s_and_nothing_lost() {
    let redis = RedisServer::start_with(redis_fixture::ServerConfig::appendonly());
    let mut s = TestServer::start_on(redis, Limits::default(), Tokens::default()).await;
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "before", "id": "before" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    s.redis.kill();
    let outage = Instant::now();
    let calls = [
        ("/v1/queues/q/messages", json!({ "payload": "during" })),
        ("/v1/queues/q/receive", json!({ "max": 1, "wait": "5s" })),
        (
            "/v1/queues/q/ack",
            json!({ "receipts": ["000000000001000000000001gx"] }),
        ),
    ];
    let mut answered = 0;
    while outage.elapsed() < Duration::from_secs(10) {
        for (path, body) in &calls {
            let started = Instant::now();
            let answer = s.post(path, body.clone()).await;
            let took = started.elapsed();
            assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
            assert!(
                took < Duration::from_secs(4),
                "{path} answered after {took:?}"
            );
            answered += 1;
        }
    }
    assert!(
        answered >= 6,
        "only {answered} calls in 10 s: they were slow"
    );

    s.redis.restart();
    wait_until(Duration::from_secs(10), "sends to work again", || async {
        s.post("/v1/queues/q/messages", json!({ "payload": "after" }))
            .await
            .0
            == StatusCode::CREATED
    })
    .await;
    let got = receive(&s, "q", 10, "0s").await;
    let payloads: Vec<&str> = got.iter().filter_map(|d| d["payload"].as_str()).collect();
    assert!(
        payloads.contains(&"before"),
        "the message from before the outage: {payloads:?}"
    );
    assert!(
        !payloads.contains(&"during"),
        "nothing refused was written: {payloads:?}"
    );
}

/// Redis at `maxmemory` (noeviction): a send is a 503 `redis_full` and writes nothing, the
/// queue still drains over the API, and sends work again once memory frees.
#[tokio::test]
async fn a_full_redis_refuses_sends_with_a_code_and_still_drains() {
    let s = TestServer::start().await;
    for id in ["a", "b"] {
        let (status, _) = s
            .post("/v1/queues/q/messages", json!({ "payload": id, "id": id }))
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let keys_before = s.redis.cli(&["DBSIZE"]);
    s.redis
        .cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    s.redis.cli(&["CONFIG", "SET", "maxmemory", "1"]);

    for body in [
        json!({ "payload": "c", "id": "c" }),
        json!({ "payload": "d" }),
    ] {
        let answer = s.post("/v1/queues/q/messages", body).await;
        assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "redis_full");
    }
    let answer = s
        .post(
            "/v1/queues/q/batch",
            json!({ "messages": [{ "payload": "e" }, { "payload": "f", "id": "f" }] }),
        )
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "redis_full");
    assert_eq!(s.redis.cli(&["DBSIZE"]), keys_before, "no key was added");
    let (_, stats) = s.get("/v1/queues/q").await;
    assert_eq!(stats["ready"], 2, "only a and b: {stats}");
    assert_error(
        &s.get("/v1/queues/q/messages/c").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    // Draining works while full.
    let got = receive(&s, "q", 10, "0s").await;
    assert_eq!(got.len(), 2);
    let receipts: Vec<&str> = got.iter().filter_map(|d| d["receipt"].as_str()).collect();
    let (status, acked) = s
        .post("/v1/queues/q/ack", json!({ "receipts": receipts }))
        .await;
    assert_eq!(status, StatusCode::OK, "{acked}");
    assert!(acked["results"]
        .as_array()
        .is_some_and(|r| r.iter().all(|r| r["ok"] == true)));

    s.redis.cli(&["CONFIG", "SET", "maxmemory", "0"]);
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "c", "id": "c" }),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "sends work again once memory frees"
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
