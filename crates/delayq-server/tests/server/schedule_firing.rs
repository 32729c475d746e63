//! A schedule's jitter and overlap over HTTP and the CLI: set on PUT, shown on GET, applied
//! by the server's scheduler, and bad values refused with 400 and nothing written.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::cli::{fails, json as cli_json};
use crate::common::*;

#[tokio::test]
async fn a_jittered_schedule_without_overlap_is_put_shown_and_fired() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/hourly",
            Some(json!({ "every": "1s", "payload": 1, "jitter": "300ms", "overlap": "skip" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(
        (&created["jitter_ms"], &created["overlap"]),
        (&json!(300), &json!("skip"))
    );
    let got = receive(&s, "reports", 1, "5s").await;
    assert_eq!(got.len(), 1, "no tick delivered");
    let id = got[0]["id"].as_str().expect("id");
    let tick: u64 = id
        .rsplit(':')
        .next()
        .and_then(|t| t.parse().ok())
        .expect("tick");
    let offset = delayq::tick_jitter("hourly", tick, std::time::Duration::from_millis(300));
    assert_eq!(
        got[0]["due_ms"].as_u64(),
        Some(tick + offset.as_millis() as u64)
    );

    for bad in [
        json!({ "every": "1s", "payload": 1, "jitter": "0s" }),
        json!({ "every": "1s", "payload": 1, "overlap": "queue" }),
    ] {
        let answer = s
            .call(
                Method::PUT,
                "/v1/queues/reports/schedules/bad",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{bad}: {}", answer.1);
    }
    let (status, _) = s.get("/v1/queues/reports/schedules/bad").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing written");
}

#[test]
fn the_cli_puts_a_schedule_with_a_jitter_and_no_overlap() {
    let redis = RedisServer::start();
    let put = cli_json(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "nightly",
            "x",
            "--every",
            "1h",
            "--jitter",
            "5m",
            "--overlap",
            "skip",
        ],
    );
    assert_eq!(
        (&put["jitter_ms"], &put["overlap"]),
        (&json!(300_000), &json!("skip"))
    );
    let refused = fails(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "bad",
            "x",
            "--every",
            "1h",
            "--overlap",
            "queue",
        ],
    );
    assert!(refused.contains("overlap"), "{refused}");
}
