//! Data formats over HTTP: a queue's format and the upgrade's progress in its own route, in
//! the stats, `/metrics` and the dashboard; the upgrade, refused while a process that reads
//! only older formats is announced. (Two builds at once: `rolling_upgrade.rs`.)

use reqwest::StatusCode;
use serde_json::json;

use crate::common::*;

/// A queue of two partitions as the release before left it: nothing names its format.
fn legacy_queue(s: &TestServer) {
    s.redis.cli(&["SET", "dq:{legacy}:partitions", "2"]);
    s.redis.cli(&["SADD", "dq:queues", "legacy"]);
}

/// The Redis server's clock in ms, which leases in the registry of processes go by.
pub(crate) fn server_ms(redis: &RedisServer) -> u64 {
    let time = redis.cli(&["TIME"]);
    let mut parts = time.lines().map(|l| l.trim().parse::<u64>().expect("TIME"));
    let (secs, micros) = (parts.next().expect("secs"), parts.next().expect("micros"));
    secs * 1000 + micros / 1000
}

#[tokio::test]
async fn a_queue_shows_its_format_and_is_upgraded_once_no_older_process_runs() {
    let s = TestServer::start().await;
    let newest = u64::from(delayq::DATA_FORMAT);
    s.post("/v1/queues/fresh/messages", json!({ "payload": 1 }))
        .await;
    let (status, fresh) = s.get("/v1/queues/fresh/format").await;
    assert_eq!(status, StatusCode::OK, "{fresh}");
    assert_eq!(fresh["format"], newest, "a new queue is stamped: {fresh}");
    assert_eq!(fresh["current"], true, "{fresh}");

    legacy_queue(&s);
    let (_, legacy) = s.get("/v1/queues/legacy/format").await;
    assert_eq!(
        (
            &legacy["format"],
            &legacy["partitions"],
            &legacy["upgraded"]
        ),
        (&json!(1), &json!([1, 1]), &json!(0)),
        "{legacy}"
    );
    let (_, stats) = s.get("/v1/queues/legacy").await;
    assert_eq!(stats["data_format"], 1, "{stats}");
    let (_, page) = s.get_text("/metrics").await;
    assert!(
        page.contains("delayq_data_format{queue=\"legacy\"} 1"),
        "{page}"
    );
    assert!(page.contains(&format!("delayq_data_format{{queue=\"fresh\"}} {newest}")));
    let (_, html) = s.get_text("/ui/queues/legacy").await;
    assert!(
        html.contains("data format") && html.contains("Upgrade data format"),
        "{html}"
    );

    // A process of the release before is announced: the upgrade waits for it.
    let deadline = (server_ms(&s.redis) + 30_000).to_string();
    s.redis
        .cli(&["ZADD", "dq:processes", &deadline, "1 old-host:7:0000cafe"]);
    let (_, processes) = s.get("/v1/processes").await;
    assert!(
        processes["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .any(|p| p["name"] == "old-host:7:0000cafe" && p["newest_format"] == 1),
        "{processes}"
    );
    let answer = s.post("/v1/queues/legacy/upgrade", json!({})).await;
    assert_error(&answer, StatusCode::CONFLICT, "older_processes");
    let message = answer.1["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("old-host:7:0000cafe"), "{message}");
    let (_, legacy) = s.get("/v1/queues/legacy/format").await;
    assert_eq!(legacy["upgraded"], 0, "a refused upgrade changed something");

    s.redis
        .cli(&["ZREM", "dq:processes", "1 old-host:7:0000cafe"]);
    let (status, upgraded) = s.post("/v1/queues/legacy/upgrade", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{upgraded}");
    assert_eq!(
        (&upgraded["partitions"], &upgraded["current"]),
        (&json!([newest, newest]), &json!(true)),
        "{upgraded}"
    );
    let (_, html) = s.get_text("/ui/queues/legacy").await;
    assert!(
        !html.contains("Upgrade data format"),
        "still offered after the upgrade"
    );
}
