//! Push delivery against a real local receiver over HTTP: on time and signed; retries with
//! the message's backoff; `Retry-After`; dead statuses; timeouts; the failure callback; two
//! servers sharing the work; a server killed mid-request; and SSRF refusals.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::push::signature;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::{now_ms, Answer, Receiver};
use crate::serve::Serve;

/// Limits that let pushes reach this host (the receiver listens on loopback).
fn loopback_allowed() -> Limits {
    Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    }
}

async fn server() -> TestServer {
    TestServer::start_with(loopback_allowed(), Tokens::default()).await
}

/// Sets `queue`'s push target to the receiver (`extra` added to the body); returns its key.
async fn set_target(s: &TestServer, queue: &str, receiver: &Receiver, extra: Value) -> String {
    let mut body = json!({ "url": format!("{}/hook", receiver.url) });
    if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
        b.extend(e.clone());
    }
    let (status, target) = s
        .call(Method::PUT, &format!("/v1/queues/{queue}/push"), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{target}");
    target["signing_keys"][0]
        .as_str()
        .expect("a key")
        .to_owned()
}

async fn send(s: &TestServer, queue: &str, body: Value) -> String {
    let (status, sent) = s.post(&format!("/v1/queues/{queue}/messages"), body).await;
    assert!(status.is_success(), "{sent}");
    sent["id"].as_str().expect("id").to_owned()
}

async fn wait_for_requests(receiver: &Receiver, id: &str, n: usize, limit: Duration) {
    wait_until(limit, &format!("{n} requests for {id}"), || async {
        receiver.for_id(id).len() >= n
    })
    .await;
}

async fn state_of(s: &TestServer, queue: &str, id: &str) -> Value {
    s.get(&format!("/v1/queues/{queue}/messages/{id}")).await.1
}

#[tokio::test]
async fn a_due_message_is_pushed_on_time_and_signed() {
    let s = server().await;
    let receiver = Receiver::start().await;
    let key = set_target(
        &s,
        "orders",
        &receiver,
        json!({ "headers": { "x-team": "shop" } }),
    )
    .await;
    let id = send(
        &s,
        "orders",
        json!({ "payload": { "close": 1234 }, "delay": "500ms", "id": "close-1234" }),
    )
    .await;
    wait_for_requests(&receiver, &id, 1, Duration::from_secs(10)).await;
    let request = &receiver.for_id(&id)[0];
    let due: u64 = request.header("delayq-due-ms").parse().expect("due ms");
    assert!(
        request.began_ms >= due,
        "pushed {} ms early",
        due - request.began_ms
    );
    assert_eq!(request.path, "/hook");
    assert_eq!(request.body, br#"{"close":1234}"#);
    assert_eq!(request.header("content-type"), "application/json");
    assert_eq!(request.header("x-team"), "shop");
    assert_eq!(request.header("delayq-attempt"), "1");
    assert_eq!(request.header("delayq-queue"), "orders");
    let header = request.header(signature::HEADER);
    let now = now_ms() / 1000;
    let signed = signature::Signed {
        queue: "orders",
        id: &id,
        attempt: 1,
        body: &request.body,
    };
    assert!(
        signature::verify(&key, header, &signed, now, 300),
        "{header}"
    );
    let tampered = signature::Signed {
        body: br#"{"close":9999}"#,
        ..signed
    };
    assert!(!signature::verify(&key, header, &tampered, now, 300));
    // Acked: gone.
    wait_until(Duration::from_secs(5), "the ack", || async {
        state_of(&s, "orders", &id).await["error"]["code"] == "not_found"
    })
    .await;
    // The target's rate limit is the queue's, kept in the same place.
    set_target(
        &s,
        "orders",
        &receiver,
        json!({ "rate_limit": { "per_second": 50, "burst": 5 } }),
    )
    .await;
    let (_, stats) = s.get("/v1/queues/orders").await;
    assert_eq!(
        stats["rate_limit"],
        json!({ "per_second": 50, "burst": 5 }),
        "{stats}"
    );
    // Setting the target again keeps its signing key.
    let (_, target) = s.get("/v1/queues/orders/push").await;
    assert_eq!(target["signing_keys"][0], key.as_str());
    // A pull consumer never gets a push queue's messages.
    send(&s, "orders", json!({ "payload": 2, "delay": "1h" })).await;
    assert!(receive(&s, "orders", 10, "0s").await.is_empty());
}

#[tokio::test]
async fn failures_are_retried_by_backoff_then_dead_lettered_and_the_callback_is_called_once() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(
        &s,
        "hooks",
        &receiver,
        json!({ "failure_callback": format!("{}/failed", receiver.url) }),
    )
    .await;
    let boom = Answer::Status(500, vec![], "database is down".into());
    receiver.script("h1", vec![boom.clone(), boom.clone(), boom]);
    send(
        &s,
        "hooks",
        json!({ "payload": 1, "id": "h1", "max_attempts": 3,
                "backoff": { "fixed": { "delay": "1s" } } }),
    )
    .await;
    wait_until(Duration::from_secs(20), "the dead letter", || async {
        state_of(&s, "hooks", "h1").await["state"] == "dead"
    })
    .await;
    let tries = receiver.for_id("h1");
    let hooks: Vec<_> = tries.iter().filter(|r| r.path == "/hook").collect();
    assert_eq!(hooks.len(), 3);
    for (n, pair) in hooks.windows(2).enumerate() {
        let gap = pair[1].began_ms - pair[0].began_ms;
        assert!(
            gap >= 1000,
            "retry {} came {gap} ms after the failure",
            n + 2
        );
        assert_eq!(pair[1].header("delayq-attempt"), (n + 2).to_string());
    }
    let dead = state_of(&s, "hooks", "h1").await;
    assert_eq!(dead["last_error"], "HTTP 500: database is down");
    wait_until(Duration::from_secs(10), "the failure callback", || async {
        receiver.seen().iter().any(|r| r.path == "/failed")
    })
    .await;
    // Once: give a second call time to show up, were there one.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let callbacks: Vec<_> = receiver
        .seen()
        .into_iter()
        .filter(|r| r.path == "/failed")
        .collect();
    assert_eq!(callbacks.len(), 1);
    let report: Value = serde_json::from_slice(&callbacks[0].body).expect("JSON");
    assert_eq!(
        (&report["id"], &report["queue"]),
        (&json!("h1"), &json!("hooks"))
    );
    assert_eq!(report["errors"].as_array().map(Vec::len), Some(3));
    assert_eq!(report["message"]["payload"], 1);
}

#[tokio::test]
async fn retry_after_is_honoured_and_a_410_dead_letters_at_once() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(&s, "polite", &receiver, json!({})).await;
    receiver.script(
        "slow-down",
        vec![Answer::Status(
            429,
            vec![("retry-after", "2".into())],
            "busy".into(),
        )],
    );
    receiver.script(
        "gone",
        vec![Answer::Status(410, vec![], "no such order".into())],
    );
    let fast = json!({ "fixed": { "delay": "100ms" } });
    send(
        &s,
        "polite",
        json!({ "payload": 1, "id": "slow-down", "backoff": fast }),
    )
    .await;
    send(
        &s,
        "polite",
        json!({ "payload": 2, "id": "gone", "max_attempts": 5 }),
    )
    .await;
    wait_for_requests(&receiver, "slow-down", 2, Duration::from_secs(15)).await;
    let tries = receiver.for_id("slow-down");
    let gap = tries[1].began_ms - tries[0].began_ms;
    assert!(gap >= 2000, "retried {gap} ms after a Retry-After of 2 s");
    wait_until(Duration::from_secs(10), "the 410 dead letter", || async {
        state_of(&s, "polite", "gone").await["state"] == "dead"
    })
    .await;
    let dead = state_of(&s, "polite", "gone").await;
    assert_eq!(
        (&dead["attempts"], &dead["last_error"]),
        (&json!(1), &json!("HTTP 410: no such order"))
    );
    assert_eq!(receiver.for_id("gone").len(), 1);
}

#[tokio::test]
async fn a_hanging_receiver_hits_the_timeout_and_the_message_is_retried() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(&s, "hang", &receiver, json!({ "timeout": "500ms" })).await;
    receiver.script("h", vec![Answer::Hang(Duration::from_secs(30))]);
    send(
        &s,
        "hang",
        json!({ "payload": 1, "id": "h", "backoff": { "fixed": { "delay": "100ms" } } }),
    )
    .await;
    wait_for_requests(&receiver, "h", 2, Duration::from_secs(15)).await;
    wait_until(Duration::from_secs(5), "the ack", || async {
        state_of(&s, "hang", "h").await["error"]["code"] == "not_found"
    })
    .await;
    let tries = receiver.for_id("h");
    assert!(
        tries[0].ended_ms - tries[0].began_ms < 5_000,
        "the first request was not cut off"
    );
}

#[tokio::test]
async fn two_servers_on_one_redis_push_each_message_once() {
    let s = server().await;
    let other = s.start_beside(loopback_allowed()).await;
    let receiver = Receiver::start().await;
    set_target(&s, "shared", &receiver, json!({})).await;
    let batch: Vec<Value> = (0..100)
        .map(|i| json!({ "payload": i, "id": format!("m{i}") }))
        .collect();
    let (status, _) = other
        .post("/v1/queues/shared/batch", json!({ "messages": batch }))
        .await;
    assert_eq!(status, StatusCode::OK);
    wait_until(Duration::from_secs(20), "100 pushes", || async {
        receiver.seen().len() >= 100
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = receiver.seen();
    assert_eq!(seen.len(), 100, "a message was pushed twice");
    assert_eq!(receiver.max_concurrent_per_id(), 1);
    other.shutdown().await;
}

#[tokio::test]
async fn a_server_killed_mid_request_leaves_the_message_to_be_pushed_after_the_lease() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    // A `delayq serve` process, killed with -9 while its request hangs.
    let url = redis.url();
    let doomed = Serve::start(&["--redis-url", &url, "--push-allow", "127.0.0.0/8"], &[]).await;
    let target = json!({ "url": format!("{}/hook", receiver.url), "timeout": "2s" });
    let put = doomed
        .http
        .put(format!("{}/v1/queues/crash/push", doomed.base))
        .json(&target)
        .send()
        .await
        .expect("put target");
    assert_eq!(put.status(), StatusCode::OK);
    receiver.script("c", vec![Answer::Hang(Duration::from_secs(60))]);
    let (status, _) = doomed
        .post(
            "/v1/queues/crash/messages",
            json!({ "payload": 1, "id": "c" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    wait_for_requests(&receiver, "c", 1, Duration::from_secs(10)).await;
    doomed.kill();
    // Another server takes the message over once its lease (timeout + 5 s) has passed.
    let survivor = Endpoint::start(&url, loopback_allowed(), Tokens::default()).await;
    wait_for_requests(&receiver, "c", 2, Duration::from_secs(30)).await;
    let tries = receiver.for_id("c");
    assert_eq!(tries[1].header("delayq-attempt"), "2");
    wait_until(Duration::from_secs(5), "the ack", || async {
        survivor.get("/v1/queues/crash/messages/c").await.0 == StatusCode::NOT_FOUND
    })
    .await;
    survivor.shutdown().await;
}

#[tokio::test]
async fn pausing_a_push_queue_stops_its_pushes_until_resumed() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(&s, "paused", &receiver, json!({})).await;
    let (status, _) = s.post("/v1/queues/paused/pause", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    send(&s, "paused", json!({ "payload": 1, "id": "p" })).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(receiver.for_id("p").is_empty(), "pushed while paused");
    let (status, _) = s.post("/v1/queues/paused/resume", json!({})).await;
    assert_eq!(status, StatusCode::OK);
    wait_for_requests(&receiver, "p", 1, Duration::from_secs(10)).await;
}

#[tokio::test]
async fn targets_on_private_addresses_are_refused_unless_allowed() {
    let s = TestServer::start().await;
    for url in [
        "http://127.0.0.1:9/hook",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://[::1]/hook",
        "http://localhost:9/hook",
    ] {
        let answer = s
            .call(
                Method::PUT,
                "/v1/queues/q/push",
                Some(json!({ "url": url })),
            )
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "push_target_refused");
        let message = answer.1["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("address"), "{url}: {message}");
    }
    for (body, code) in [
        (
            json!({ "url": "ftp://example.com/x" }),
            "invalid_push_target",
        ),
        (
            json!({ "url": "https://example.com", "method": "DELETE" }),
            "invalid_push_target",
        ),
        (
            json!({ "url": "https://example.com", "signing_keys": ["short"] }),
            "invalid_push_target",
        ),
        (
            json!({ "url": "https://example.com", "concurrency": 0 }),
            "invalid_push_target",
        ),
        (
            json!({ "url": "https://user:pw@example.com" }),
            "invalid_push_target",
        ),
    ] {
        let answer = s
            .call(Method::PUT, "/v1/queues/q/push", Some(body.clone()))
            .await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let none = s.get("/v1/queues/q/push").await;
    assert_error(&none, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_message_can_carry_its_own_url_and_headers() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(
        &s,
        "own",
        &receiver,
        json!({ "headers": { "x-team": "shop" },
                "allow_message_urls": [receiver.url, "http://10.0.0.1"] }),
    )
    .await;
    let own =
        json!({ "url": format!("{}/orders/1234", receiver.url), "headers": { "x-tenant": "7" } });
    send(
        &s,
        "own",
        json!({ "payload": { "close": 1234 }, "id": "o1", "push": own, "delay": "300ms" }),
    )
    .await;
    // Until it is pushed, get shows the payload as sent.
    let (_, info) = s.get("/v1/queues/own/messages/o1").await;
    assert_eq!(info["payload"], json!({ "close": 1234 }));
    wait_for_requests(&receiver, "o1", 1, Duration::from_secs(10)).await;
    let request = &receiver.for_id("o1")[0];
    assert_eq!(request.path, "/orders/1234");
    // The target's headers go to the target's URL only.
    assert_eq!(
        (request.header("x-tenant"), request.header("x-team")),
        ("7", "")
    );
    assert_eq!(request.body, br#"{"close":1234}"#);

    // Its own URL is held to the same address rules as a target's: refused, dead at once.
    let private = json!({ "url": "http://10.0.0.1/orders" });
    send(
        &s,
        "own",
        json!({ "payload": 1, "id": "o2", "push": private, "max_attempts": 5 }),
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the refused message's dead letter",
        || async { state_of(&s, "own", "o2").await["state"] == "dead" },
    )
    .await;
    let dead = state_of(&s, "own", "o2").await;
    let error = dead["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("private address"), "{dead}");
    let bad = s
        .post(
            "/v1/queues/own/messages",
            json!({ "payload": 1, "push": { "url": "ftp://x/y" } }),
        )
        .await;
    assert_error(&bad, StatusCode::BAD_REQUEST, "invalid_option");
    // The queue page shows where messages may go.
    let html = s
        .http
        .get(format!("{}/ui/queues/own", s.base))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html");
    assert!(
        html.contains(&format!("allowed on {}, http://10.0.0.1", receiver.url)),
        "{html}"
    );
}

#[tokio::test]
async fn a_proxy_in_the_environment_is_not_used_for_pushes() {
    // A proxy resolves the target's host itself, where the address checks cannot see it; so
    // pushes go straight to the target whatever HTTP_PROXY says.
    let redis = RedisServer::start();
    let proxy = Receiver::start().await;
    let receiver = Receiver::start().await;
    let serve = Serve::start(
        &["--redis-url", &redis.url(), "--push-allow", "127.0.0.0/8"],
        &[
            ("HTTP_PROXY", &proxy.url),
            ("http_proxy", &proxy.url),
            ("ALL_PROXY", &proxy.url),
            ("NO_PROXY", ""),
        ],
    )
    .await;
    let target = json!({ "url": format!("{}/hook", receiver.url) });
    let put = serve
        .http
        .put(format!("{}/v1/queues/proxied/push", serve.base))
        .json(&target)
        .send()
        .await
        .expect("put target");
    assert_eq!(put.status(), StatusCode::OK);
    let (status, _) = serve
        .post(
            "/v1/queues/proxied/messages",
            json!({ "payload": 1, "id": "p" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    wait_for_requests(&receiver, "p", 1, Duration::from_secs(10)).await;
    assert!(proxy.seen().is_empty(), "a push went through the proxy");
}

#[tokio::test]
async fn push_answers_show_on_the_dashboard_by_class() {
    let s = server().await;
    let receiver = Receiver::start().await;
    set_target(&s, "answers", &receiver, json!({})).await;
    receiver.script(
        "gone",
        vec![Answer::Status(410, vec![], "no such order".into())],
    );
    for id in ["ok-1", "ok-2", "gone"] {
        send(&s, "answers", json!({ "payload": 1, "id": id })).await;
    }
    for id in ["ok-1", "ok-2", "gone"] {
        wait_for_requests(&receiver, id, 1, Duration::from_secs(10)).await;
    }
    // Each server adds its tally to the queue's history about once a second.
    let page = format!("{}/ui/queues/answers", s.base);
    wait_until(
        Duration::from_secs(10),
        "the answers on the page",
        || async {
            let html = s
                .http
                .get(&page)
                .send()
                .await
                .expect("page")
                .text()
                .await
                .expect("html");
            html.contains("2xx: 2") && html.contains("4xx: 1")
        },
    )
    .await;
}
