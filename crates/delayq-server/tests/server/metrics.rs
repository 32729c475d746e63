//! `/metrics`: Prometheus text with per-queue counters, gauges read from Redis, and the
//! lateness histogram with its buckets.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::serve::Serve;

/// The value of the sample `name{labels}` in Prometheus text, if present.
fn sample(text: &str, name_and_labels: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

#[tokio::test]
async fn metrics_count_what_happened_to_each_queue() {
    let s = TestServer::start().await;
    let q = "metered";
    for (i, id) in ["a", "b", "c", "d"].iter().enumerate() {
        let body = json!({ "payload": i, "id": id, "max_attempts": 1 });
        s.post(&format!("/v1/queues/{q}/messages"), body).await;
    }
    // A duplicate is not a send.
    s.post(
        &format!("/v1/queues/{q}/messages"),
        json!({ "payload": 0, "id": "a" }),
    )
    .await;
    s.call(Method::DELETE, &format!("/v1/queues/{q}/messages/d"), None)
        .await;
    let got = receive(&s, q, 2, "0s").await;
    s.post(
        &format!("/v1/queues/{q}/ack"),
        json!({ "receipt": got[0]["receipt"] }),
    )
    .await;
    s.post(
        &format!("/v1/queues/{q}/nack"),
        json!({ "receipt": got[1]["receipt"] }),
    )
    .await;
    // c: delivered under a short lease that expires, then reclaimed (its only attempt: dead).
    let (_, short) = s
        .post(
            &format!("/v1/queues/{q}/receive"),
            json!({ "lease": "50ms" }),
        )
        .await;
    assert_eq!(short["deliveries"][0]["id"], "c");
    wait_until(
        Duration::from_secs(5),
        "the lease to be reclaimed",
        || async {
            receive(&s, q, 1, "0s").await;
            s.get(&format!("/v1/queues/{q}")).await.1["dead"] == 2
        },
    )
    .await;

    let (status, text) = s.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let l = format!("{{queue=\"{q}\"}}");
    let expect = [
        ("delayq_messages_sent_total", 4.0),
        ("delayq_messages_cancelled_total", 1.0),
        ("delayq_messages_delivered_total", 3.0),
        ("delayq_messages_acked_total", 1.0),
        ("delayq_messages_nacked_total", 1.0),
        ("delayq_messages_dead_lettered_total", 2.0),
        ("delayq_messages_lease_expired_total", 1.0),
        ("delayq_delivery_lateness_seconds_count", 3.0),
    ];
    for (name, want) in expect {
        assert_eq!(
            sample(&text, &format!("{name}{l}")),
            Some(want),
            "{name} in:\n{text}"
        );
    }
    let dead = format!("delayq_messages{{queue=\"{q}\",state=\"dead\"}}");
    assert_eq!(sample(&text, &dead), Some(2.0), "{text}");
    let bucket = format!("delayq_delivery_lateness_seconds_bucket{{queue=\"{q}\",le=\"0.0005\"}}");
    assert!(
        sample(&text, &bucket).is_some(),
        "lateness has buckets from 0.5 ms:\n{text}"
    );
}

/// An alert on "Redis unavailable" needs a scrape that still answers when Redis does not:
/// `delayq_redis_up` says whether the last reading of the queues' gauges reached it.
#[tokio::test]
async fn metrics_say_when_redis_is_away_and_when_it_is_back() {
    let mut s = TestServer::start().await;
    s.post("/v1/queues/up/messages", json!({ "payload": 1 }))
        .await;
    let scrape = |s: &TestServer| {
        let request = s.http.get(format!("{}/metrics", s.base));
        async move {
            let resp = request.send().await.expect("request");
            (resp.status(), resp.text().await.unwrap_or_default())
        }
    };
    let (status, text) = scrape(&s).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(sample(&text, "delayq_redis_up"), Some(1.0), "{text}");

    s.redis.kill();
    // The gauges are cached for a second: wait for a scrape that reads again.
    wait_until(
        Duration::from_secs(10),
        "a scrape that says Redis is away",
        || async {
            let (status, text) = scrape(&s).await;
            status == StatusCode::OK && sample(&text, "delayq_redis_up") == Some(0.0)
        },
    )
    .await;
    s.redis.restart();
    wait_until(
        Duration::from_secs(10),
        "a scrape that says Redis is back",
        || async { sample(&scrape(&s).await.1, "delayq_redis_up") == Some(1.0) },
    )
    .await;
}

/// The base name of a sample's metric (a histogram's `_bucket`, `_sum` and `_count` series
/// are described under their histogram's name).
fn base_name(sample_line: &str) -> &str {
    let name = sample_line.split(['{', ' ']).next().unwrap_or_default();
    ["_bucket", "_sum", "_count"]
        .iter()
        .find_map(|suffix| name.strip_suffix(suffix))
        .unwrap_or(name)
}

/// A server of its own (its metrics are its process's): every metric it exports says what
/// it is (`# HELP`), the build is named, and each request is counted and timed under its
/// route's template, never the path a client made up.
#[tokio::test]
async fn every_metric_is_described_and_requests_are_counted_by_route() {
    let redis = redis_fixture::RedisServer::start();
    let serve = Serve::start(&["--redis-url", &redis.url()], &[]).await;
    for id in ["a", "b"] {
        let (status, _) = serve
            .post(
                "/v1/queues/timed/messages",
                json!({ "payload": 1, "id": id }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED);
    }
    let (status, _) = serve.get("/v1/queues/made-up-name/messages/nope").await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = serve.get("/no/such/route").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let (status, text) = serve.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    let described: Vec<&str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# HELP "))
        .filter_map(|l| l.split(' ').next())
        .collect();
    let samples: Vec<&str> = text
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert!(samples.len() > 10, "{text}");
    for line in &samples {
        let name = base_name(line);
        assert!(
            described.contains(&name),
            "no # HELP for {name} in:\n{text}"
        );
    }

    let build = format!(
        "delayq_build_info{{version=\"{}\",data_format=\"{}\"}}",
        env!("CARGO_PKG_VERSION"),
        delayq::DATA_FORMAT
    );
    assert_eq!(sample(&text, &build), Some(1.0), "{text}");

    let sends = "delayq_http_request_duration_seconds_count{method=\"POST\",\
                 route=\"/v1/queues/{queue}/messages\",status=\"201\"}";
    assert_eq!(sample(&text, sends), Some(2.0), "{text}");
    let missing = "delayq_http_request_duration_seconds_count{method=\"GET\",\
                   route=\"/v1/queues/{queue}/messages/{id}\",status=\"404\"}";
    assert_eq!(sample(&text, missing), Some(1.0), "{text}");
    let buckets = "delayq_http_request_duration_seconds_bucket{method=\"POST\",\
                   route=\"/v1/queues/{queue}/messages\",status=\"201\",le=\"0.0005\"}";
    assert!(sample(&text, buckets).is_some(), "{text}");
    for made_up in ["made-up-name", "/no/such/route"] {
        assert!(
            !text.contains(made_up),
            "{made_up} became a series:\n{text}"
        );
    }
}
