//! Setting and removing push targets as one change: a failure part-way leaves a queue that
//! someone consumes; a state left by a failure or by an older version is repaired by the
//! servers; a refused request writes nothing.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::Receiver;

fn loopback_allowed() -> Limits {
    Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    }
}

async fn send(s: &Endpoint, queue: &str, body: Value) {
    let (status, sent) = s.post(&format!("/v1/queues/{queue}/messages"), body).await;
    assert!(status.is_success(), "{sent}");
}

#[tokio::test]
async fn a_save_or_remove_that_fails_part_way_leaves_a_queue_someone_consumes() {
    let s = TestServer::start_with(loopback_allowed(), Tokens::default()).await;
    // A server whose Redis user may write every queue's keys (and announce itself) but not
    // the index of pushed queues (`dq:pushed`): its saves and removes fail between their
    // steps.
    s.redis.cli(&[
        "ACL",
        "SETUSER",
        "limited",
        "on",
        ">limited-password",
        "~dq:{*",
        "~dq:processes",
        "&*",
        "+@all",
    ]);
    let url = format!(
        "redis://limited:limited-password@127.0.0.1:{}/",
        s.redis.port()
    );
    let limited = Endpoint::start(&url, loopback_allowed(), Tokens::default()).await;
    let receiver = Receiver::start().await;
    let target = json!({ "url": format!("{}/hook", receiver.url) });

    // Saving: the index is written first and refused, so nothing else is written.
    let before = all_keys(&s.redis);
    let (status, body) = limited
        .call(Method::PUT, "/v1/queues/acl/push", Some(target.clone()))
        .await;
    assert!(status.is_server_error(), "{status} {body}");
    let shown = s.get("/v1/queues/acl/push").await;
    assert_error(&shown, StatusCode::NOT_FOUND, "not_found");
    assert_eq!(all_keys(&s.redis), before);

    // Removing: the target and its flag go in one step; the index entry, refused, stays
    // behind, and is harmless.
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/acl/push", Some(target))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    send(&s, "acl", json!({ "payload": 1, "id": "pushed" })).await;
    wait_until(Duration::from_secs(10), "the push", || async {
        !receiver.for_id("pushed").is_empty()
    })
    .await;
    let (status, body) = limited
        .call(Method::DELETE, "/v1/queues/acl/push", None)
        .await;
    send(&s, "acl", json!({ "payload": 2, "id": "pulled" })).await;
    let got = receive(&s, "acl", 1, "3s").await;
    assert_eq!(
        got.len(),
        1,
        "nobody consumes the queue after a remove that failed part-way"
    );
    assert_eq!(got[0]["id"], "pulled");
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_error(
        &s.get("/v1/queues/acl/push").await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_eq!(s.redis.cli(&["SISMEMBER", "dq:pushed", "acl"]), "1");
    assert!(receiver.for_id("pulled").is_empty());
    limited.shutdown().await;
}

#[tokio::test]
async fn targets_an_older_version_stored_and_changes_it_left_half_done_are_repaired() {
    let redis = RedisServer::start();
    let receiver = Receiver::start().await;
    // A target as an older version stored it (without allow_message_urls), left as its save
    // left it when it failed before its last step: the target and the index entry, but the
    // queue not flagged for push delivery, so no server would push it.
    let old = |path: &str| {
        json!({
            "url": format!("{}/{path}", receiver.url), "method": "POST",
            "headers": { "x-team": "shop" }, "timeout_ms": 10000, "concurrency": 4,
            "signing_keys": ["0123456789abcdef0123"], "dead_statuses": null,
            "failure_callback": null, "follow_redirects": false,
        })
        .to_string()
    };
    redis.cli(&["SET", "dq:{legacy}:push", &old("legacy")]);
    // A queue its remove left flagged after deleting the target: nobody would consume it.
    redis.cli(&["HSET", "dq:{stuck}:control", "push", "1"]);
    redis.cli(&["SADD", "dq:pushed", "legacy", "stuck"]);
    let s = TestServer::start_on(redis, loopback_allowed(), Tokens::default()).await;

    // A queue of 3 partitions whose partitions 1 and 2 were never flagged.
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/parted",
            Some(json!({ "partitions": 3 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    s.redis.cli(&["SET", "dq:{parted}:push", &old("parted")]);
    s.redis.cli(&["HSET", "dq:{parted}:control", "push", "1"]);
    s.redis.cli(&["SADD", "dq:pushed", "parted"]);

    send(&s, "legacy", json!({ "payload": 1, "id": "l1" })).await;
    send(&s, "stuck", json!({ "payload": 1, "id": "s1" })).await;
    for i in 0..12 {
        send(&s, "parted", json!({ "payload": i })).await;
    }
    wait_until(Duration::from_secs(10), "the old target's push", || async {
        !receiver.for_id("l1").is_empty()
    })
    .await;
    assert_eq!(receiver.for_id("l1")[0].header("x-team"), "shop");
    let got = receive(&s, "stuck", 1, "5s").await;
    assert_eq!(got.len(), 1, "the stuck queue is still stuck");
    wait_until(
        Duration::from_secs(10),
        "every partition's pushes",
        || async {
            receiver
                .seen()
                .iter()
                .filter(|r| r.path == "/parted")
                .count()
                == 12
        },
    )
    .await;

    // The old target reads as one that allows no message URLs.
    let (_, target) = s.get("/v1/queues/legacy/push").await;
    assert_eq!(target["allow_message_urls"], json!([]), "{target}");
    let refused = s
        .post(
            "/v1/queues/legacy/messages",
            json!({ "payload": 1, "push": { "url": "https://example.com/x" } }),
        )
        .await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "push_url_not_allowed");

    // Removing the partitioned queue's target gives every partition back to pull consumers.
    let (status, _) = s.call(Method::DELETE, "/v1/queues/parted/push", None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    for i in 0..6 {
        send(&s, "parted", json!({ "payload": i })).await;
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut pulled = 0;
    while pulled < 6 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "pulled {pulled} of 6 after the target was removed"
        );
        pulled += receive(&s, "parted", 6, "1s").await.len();
    }
}

#[tokio::test]
async fn refused_push_requests_write_nothing() {
    let s = TestServer::start_with(loopback_allowed(), Tokens::default()).await;
    let url = "http://127.0.0.1:9/hook";
    let before = all_keys(&s.redis);
    for (method, body) in [
        (
            Method::PUT,
            Some(json!({ "url": url, "rate_limit": { "per_second": 0 } })),
        ),
        (
            Method::PUT,
            Some(json!({ "url": url, "rate_limit": { "per_second": 5, "burst": 0 } })),
        ),
        (Method::PUT, Some(json!({ "url": url, "concurrency": 0 }))),
        (Method::PUT, Some(json!({ "url": "http://10.0.0.1/hook" }))),
        (
            Method::PUT,
            Some(json!({ "url": url, "headers": { "host": "elsewhere" } })),
        ),
        (
            Method::PUT,
            Some(json!({ "url": url, "allow_message_urls": ["https://x.example/path"] })),
        ),
        (Method::DELETE, None),
    ] {
        let answer = s
            .call(method.clone(), "/v1/queues/fresh/push", body.clone())
            .await;
        assert!(
            answer.0.is_client_error(),
            "{method} {body:?}: {} {}",
            answer.0,
            answer.1
        );
        assert_eq!(all_keys(&s.redis), before, "{method} {body:?} wrote a key");
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
    assert_eq!(status, StatusCode::OK, "{body}");
}
