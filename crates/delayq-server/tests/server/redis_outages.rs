//! A Redis that went away, is loading its data, is full or cannot persist: a quick 503 with
//! a code (a long poll in progress answers at once), nothing accepted is lost, what drains
//! the queue goes on, and the server recovers when Redis is back.

use std::time::{Duration, Instant};

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;

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
async fn a_long_poll_in_progress_when_redis_dies_answers_503_at_once() {
    let mut s = TestServer::start().await;
    let polling =
        long_poll_waiting(&s, "/v1/queues/q/receive", json!({ "wait": "20s" }), "q").await;
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

/// A Redis that cannot persist (its disk full or broken: `MISCONF`): a send and a receive
/// are a 503 `unavailable` that clients try again, nothing is written, reads go on, and the
/// same calls work once Redis persists again. (It was a 500 `internal`, found by the chaos
/// run's disk-full scenario.)
#[tokio::test]
async fn a_redis_that_cannot_persist_is_a_503_then_the_server_recovers() {
    let s = TestServer::start().await;
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "a", "id": "a" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    s.redis.fail_persistence();
    let keys = s.redis.cli(&["DBSIZE"]);
    let answer = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "b", "id": "b" }),
        )
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    assert!(answer.1.to_string().contains("MISCONF"), "{}", answer.1);
    let answer = s
        .post("/v1/queues/q/receive", json!({ "max": 10, "wait": "0s" }))
        .await;
    assert_error(&answer, StatusCode::SERVICE_UNAVAILABLE, "unavailable");
    let (status, stats) = s.get("/v1/queues/q").await;
    assert_eq!((status, stats["ready"].as_u64()), (StatusCode::OK, Some(1)));
    assert_eq!(s.redis.cli(&["DBSIZE"]), keys, "nothing was written");

    s.redis.persist_again();
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": "b", "id": "b" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let got = receive(&s, "q", 10, "0s").await;
    assert_eq!(got.len(), 2);
}
