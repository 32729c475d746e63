//! The admin CLI: every subcommand against a real Redis, its output (table and `--json`)
//! and its exit codes.

use std::process::{Command, Output};

use serde_json::{json, Value};

use crate::common::*;

pub(crate) fn delayq(redis: &RedisServer, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(args)
        .env("DELAYQ_REDIS_URL", redis.url())
        .output()
        .expect("run delayq")
}

/// Runs a command that must succeed and returns its stdout.
#[track_caller]
pub(crate) fn ok(redis: &RedisServer, args: &[&str]) -> String {
    let out = delayq(redis, args);
    assert!(
        out.status.success(),
        "delayq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Runs a command with `--json` and parses its output.
#[track_caller]
pub(crate) fn json(redis: &RedisServer, args: &[&str]) -> Value {
    let mut args = args.to_vec();
    args.push("--json");
    serde_json::from_str(&ok(redis, &args)).expect("JSON output")
}

/// Runs a command that must fail; returns its one-line reason.
#[track_caller]
pub(crate) fn fails(redis: &RedisServer, args: &[&str]) -> String {
    let out = delayq(redis, args);
    assert!(!out.status.success(), "delayq {args:?} succeeded");
    let err = String::from_utf8(out.stderr).expect("utf-8");
    assert_eq!(err.trim_end().lines().count(), 1, "one line: {err}");
    err
}

#[test]
fn send_get_cancel_and_reschedule() {
    let redis = RedisServer::start();
    let sent = json(
        &redis,
        &[
            "send",
            "orders",
            r#"{"order":1}"#,
            "--json-payload",
            "--delay",
            "15m",
            "--id",
            "close-1",
        ],
    );
    assert_eq!(
        (sent["id"].as_str(), sent["duplicate"].as_bool()),
        (Some("close-1"), Some(false))
    );
    let again = json(&redis, &["send", "orders", "x", "--id", "close-1"]);
    assert_eq!(again["duplicate"], true);
    let table = ok(&redis, &["get", "orders", "close-1"]);
    assert!(table.contains("state       delayed"), "{table}");
    assert!(table.contains(r#"payload     {"order":1}"#), "{table}");
    let got = json(&redis, &["get", "orders", "close-1"]);
    assert_eq!(got["state"], "delayed");
    let moved = json(
        &redis,
        &[
            "reschedule",
            "orders",
            "close-1",
            "--at",
            "2030-01-01T00:00:00Z",
        ],
    );
    assert_eq!(moved["due_ms"], 1_893_456_000_000u64);
    // Any RFC 3339 offset and fraction means the instant it names.
    let moved = json(
        &redis,
        &[
            "reschedule",
            "orders",
            "close-1",
            "--at",
            "2030-01-01T10:00:00.123+05:45",
        ],
    );
    assert_eq!(moved["due_ms"], 1_893_471_300_123u64);
    let cancelled = json(&redis, &["cancel", "orders", "close-1"]);
    assert_eq!(cancelled["cancelled"], true);
    assert!(fails(&redis, &["get", "orders", "close-1"]).contains("not found"));
    assert!(fails(&redis, &["cancel", "orders", "close-1"]).contains("not found"));
    assert!(fails(&redis, &["send", "bad name", "x"]).contains("queue name"));
    assert!(fails(&redis, &["send", "q", "{", "--json-payload"]).contains("not JSON"));
}

#[test]
fn stats_queues_and_dead_letters() {
    let redis = RedisServer::start();
    ok(&redis, &["send", "a", "1"]);
    ok(&redis, &["send", "b", "2", "--delay", "1h"]);
    // `--json` prints the HTTP API's answers: GET /v1/queues for both.
    let names: Vec<Value> = json(&redis, &["queues"])["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .map(|q| q["name"].clone())
        .collect();
    assert_eq!(names, [serde_json::json!("a"), serde_json::json!("b")]);
    let stats = json(&redis, &["stats"])["queues"].clone();
    assert_eq!(stats[0]["name"], "a");
    assert_eq!(
        (stats[0]["ready"].as_u64(), stats[1]["delayed"].as_u64()),
        (Some(1), Some(1))
    );
    let table = ok(&redis, &["stats", "b"]);
    assert!(
        table.lines().next().is_some_and(|h| h.starts_with("QUEUE")),
        "{table}"
    );

    // A dead letter, made with the library.
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let dq = delayq::DelayQ::connect(&redis.url())
            .await
            .expect("connect");
        let q = dq.queue("jobs").expect("queue");
        for id in ["j1", "j2"] {
            q.send(id, &delayq::SendOptions::new().id(id).max_attempts(1))
                .await
                .expect("send");
        }
        let mut c = q.consumer().await.expect("consumer");
        let opts = delayq::ReceiveOptions {
            max: 2,
            ..Default::default()
        };
        for d in c.receive(&opts).await.expect("receive") {
            q.nack(&d, "boom", None).await.expect("nack");
        }
    });
    let dead = json(&redis, &["dead", "list", "jobs"]);
    assert_eq!(dead["total"], 2, "{dead}");
    let dead = &dead["dead_letters"];
    assert_eq!(dead.as_array().map(Vec::len), Some(2));
    assert_eq!(dead[0]["last_error"], "boom");
    let table = ok(&redis, &["dead", "list", "jobs"]);
    assert!(table.contains("j1") && table.contains("boom"), "{table}");
    assert_eq!(json(&redis, &["dead", "requeue", "jobs", "j1"])["count"], 1);
    assert!(fails(&redis, &["dead", "requeue", "jobs", "j1"]).contains("no dead letter"));
    assert_eq!(
        json(&redis, &["dead", "purge", "jobs", "--all"])["count"],
        1
    );
    assert_eq!(json(&redis, &["stats", "jobs"])["ready"], 1, "j1 is back");
}

#[test]
fn send_takes_a_backoff_and_a_handler_timeout_and_get_shows_the_error_history() {
    let redis = RedisServer::start();
    let sent = json(
        &redis,
        &[
            "send",
            "hooks",
            "x",
            "--id",
            "h1",
            "--backoff",
            "list:30s,2m",
            "--jitter",
            "0",
            "--handler-timeout",
            "90s",
        ],
    );
    assert_eq!(sent["duplicate"], false);
    assert!(fails(&redis, &["send", "hooks", "x", "--backoff", "wobbly:1s"]).contains("list:"));
    assert!(fails(&redis, &["send", "hooks", "x", "--backoff", "linear:1s"]).contains("BASE..CAP"));

    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let before = rt.block_on(async {
        let dq = delayq::DelayQ::connect(&redis.url())
            .await
            .expect("connect");
        let q = dq.queue("hooks").expect("queue");
        let mut c = q.consumer().await.expect("consumer");
        let got = c.receive(&Default::default()).await.expect("receive");
        assert_eq!(
            got[0].handler_timeout,
            Some(std::time::Duration::from_secs(90))
        );
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        q.nack(&got[0], "boom", None).await.expect("nack");
        before
    });
    let info = json(&redis, &["get", "hooks", "h1"]);
    let due = info["due_ms"].as_u64().unwrap_or(0);
    assert!(
        (before + 30_000..before + 31_000).contains(&due),
        "due {} ms after the nack, not 30 s",
        due.saturating_sub(before)
    );
    assert_eq!(info["errors"][0]["attempt"], 1);
    assert_eq!(info["errors"][0]["error"], "boom");
    let table = ok(&redis, &["get", "hooks", "h1"]);
    assert!(
        table.contains("attempt 1 at") && table.contains("boom"),
        "{table}"
    );
}

#[test]
fn without_a_redis_it_says_what_to_do() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["queues", "--data-dir"])
        .arg(dir.path())
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .expect("run delayq");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--redis-url"), "{err}");
}

#[test]
fn create_queue_sets_the_partitions_and_stats_add_them_up() {
    let redis = RedisServer::start();
    let created = json(&redis, &["create-queue", "parted", "--partitions", "3"]);
    // The answer of PUT /v1/queues/{queue}: the new queue's stats.
    assert_eq!(
        (&created["name"], &created["partitions"]),
        (&serde_json::json!("parted"), &serde_json::json!(3)),
        "{created}"
    );
    for i in 0..6 {
        ok(&redis, &["send", "parted", &format!("m{i}")]);
    }
    // Spread over the partitions (the library's tests check how evenly).
    let tags = redis.cli(&["KEYS", "dq:{parted#*}:seq"]);
    assert!(tags.lines().count() >= 1, "{tags}");
    let stats = json(&redis, &["stats", "parted"]);
    assert_eq!(
        (&stats["ready"], &stats["partitions"]),
        (&serde_json::json!(6), &serde_json::json!(3))
    );
    let refused = delayq(&redis, &["create-queue", "parted", "--partitions", "4"]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("already has 3"), "{err}");
}

#[test]
fn redis_sentinel_finds_the_master() {
    let sentinel = redis_fixture::RedisSentinel::start();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(args)
            .arg("--redis-sentinel")
            .arg(sentinel.sentinel_urls().join(","))
            .arg("--sentinel-master")
            .arg(sentinel.master_name())
            .env_remove("DELAYQ_REDIS_URL")
            .output()
            .expect("run delayq")
    };
    let sent = run(&["send", "orders", "x", "--id", "s1", "--json"]);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    // The message is on the master the sentinels name.
    let master = &sentinel.nodes()[sentinel.master_index()];
    assert!(master.cli(&["KEYS", "*"]).contains("{orders}"));
    let got = run(&["get", "orders", "s1", "--json"]);
    let got: Value = serde_json::from_slice(&got.stdout).expect("JSON");
    assert_eq!(got["id"], json!("s1"));
}

#[test]
fn redis_cluster_takes_the_cluster_nodes() {
    let redis = RedisServer::start_with(ServerConfig::cluster());
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(args)
            .arg("--redis-cluster")
            .arg(format!("{},{}", redis.url(), redis.url()))
            .env_remove("DELAYQ_REDIS_URL")
            .output()
            .expect("run delayq")
    };
    let sent = run(&["send", "orders", "x", "--id", "c1", "--json"]);
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let got = run(&["get", "orders", "c1", "--json"]);
    let got: Value = serde_json::from_slice(&got.stdout).expect("JSON");
    assert_eq!((&got["id"], &got["state"]), (&json!("c1"), &json!("ready")));
    // The key landed in the cluster node, under the queue's hash tag.
    assert!(redis.cli(&["KEYS", "*"]).contains("{orders}"));
    let both = run(&["queues", "--redis-url", &redis.url()]);
    assert!(
        !both.status.success(),
        "--redis-url and --redis-cluster together"
    );
}

#[test]
fn pause_and_resume_a_queue() {
    let redis = RedisServer::start();
    ok(&redis, &["send", "jobs", "m"]);
    // The answer of POST .../pause: the stats, which show it paused.
    let paused = json(&redis, &["pause", "jobs"]);
    assert_eq!(
        (&paused["name"], &paused["paused"]),
        (&serde_json::json!("jobs"), &serde_json::json!(true))
    );
    let stats = json(&redis, &["stats", "jobs"]);
    assert_eq!(stats["paused"], true);
    let table = ok(&redis, &["stats", "jobs"]);
    assert!(table.contains("paused"), "{table}");
    let resumed = ok(&redis, &["resume", "jobs"]);
    assert!(resumed.contains("jobs: resumed"), "{resumed}");
    assert_eq!(json(&redis, &["stats", "jobs"])["paused"], false);
    let refused = fails(&redis, &["pause", "no!such"]);
    assert!(refused.contains("queue name"), "{refused}");
}

#[test]
fn configure_sets_the_idempotency_window() {
    let redis = RedisServer::start();
    let set = json(&redis, &["configure", "jobs", "--idempotency-window", "1h"]);
    assert_eq!(set["idempotency_window_ms"], 3_600_000, "{set}");
    let line = ok(&redis, &["configure", "jobs", "--idempotency-window", "0s"]);
    assert!(line.contains("idempotency window 0s"), "{line}");
    let refused = fails(
        &redis,
        &["configure", "jobs", "--idempotency-window", "500days"],
    );
    assert!(refused.contains("at most 366 days"), "{refused}");
    let nothing = fails(&redis, &["configure", "jobs"]);
    assert!(nothing.contains("nothing to change"), "{nothing}");
}

#[test]
fn configure_sets_and_lifts_a_rate_limit() {
    let redis = RedisServer::start();
    let set = json(
        &redis,
        &["configure", "jobs", "--rate-limit", "50", "--burst", "5"],
    );
    assert_eq!(
        set["rate_limit"],
        serde_json::json!({ "per_second": 50, "burst": 5 })
    );
    let line = ok(&redis, &["configure", "jobs", "--no-rate-limit"]);
    assert!(line.contains("rate limit none"), "{line}");
    let refused = fails(&redis, &["configure", "jobs", "--rate-limit", "0"]);
    assert!(refused.contains("at least 1 per second"), "{refused}");
}

/// `configure` says what it changed, each setting as it is now, and only those.
#[test]
fn configure_echoes_the_settings_it_changed() {
    let redis = RedisServer::start();
    let line = ok(
        &redis,
        &[
            "configure",
            "jobs",
            "--max-delay",
            "30d",
            "--group-concurrency",
            "4",
        ],
    );
    assert_eq!(
        line.trim(),
        "jobs: group concurrency 4, max delay 30days",
        "{line}"
    );
    let line = ok(
        &redis,
        &[
            "configure",
            "jobs",
            "--no-max-delay",
            "--events",
            "--events-max",
            "500",
        ],
    );
    assert_eq!(
        line.trim(),
        "jobs: max delay none, events kept 500",
        "{line}"
    );
}

#[test]
fn send_takes_a_priority_and_get_shows_it() {
    let redis = RedisServer::start();
    json(
        &redis,
        &["send", "urgent", "x", "--id", "p1", "--priority", "8"],
    );
    assert_eq!(json(&redis, &["get", "urgent", "p1"])["priority"], 8);
    json(&redis, &["send", "urgent", "y", "--id", "p2"]);
    assert_eq!(json(&redis, &["get", "urgent", "p2"])["priority"], 5);
    assert!(
        fails(&redis, &["send", "urgent", "x", "--priority", "10"]).contains("priority is 0 to 9")
    );
}

#[test]
fn schedules_are_put_listed_shown_and_deleted() {
    let redis = RedisServer::start();
    let put = json(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "nightly",
            "{\"job\":1}",
            "--json-payload",
            "--cron",
            "0 0 2 * * *",
            "--time-zone",
            "Europe/Berlin",
            "--missed",
            "all:3",
            "--priority",
            "6",
        ],
    );
    assert_eq!(
        (
            &put["name"],
            &put["missed"],
            &put["priority"],
            &put["time_zone"]
        ),
        (
            &json!("nightly"),
            &json!("all:3"),
            &json!(6),
            &json!("Europe/Berlin")
        )
    );
    assert_eq!(put["next_ticks_ms"].as_array().map(Vec::len), Some(5));
    json(
        &redis,
        &["schedule", "put", "jobs", "often", "x", "--every", "10m"],
    );
    let list = json(&redis, &["schedule", "list", "jobs"]);
    let names: Vec<&str> = list["schedules"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    assert_eq!(names, ["nightly", "often"]);
    assert_eq!(
        json(&redis, &["schedule", "get", "jobs", "often"])["every_ms"],
        600_000
    );
    let paused = json(&redis, &["schedule", "pause", "jobs", "often"]);
    assert_eq!(paused["paused"], true, "{paused}");
    assert!(ok(&redis, &["schedule", "list", "jobs"]).contains("often (paused)"));
    let resumed = json(&redis, &["schedule", "resume", "jobs", "often"]);
    assert_eq!(resumed["paused"], false, "{resumed}");
    assert!(fails(&redis, &["schedule", "pause", "jobs", "nope"]).contains("no schedule"));
    json(&redis, &["schedule", "delete", "jobs", "often"]);
    assert!(fails(&redis, &["schedule", "get", "jobs", "often"]).contains("no schedule often"));
    // A crontab line is taken (issue 50, item 10); one of four fields is not.
    let crontab = json(
        &redis,
        &["schedule", "put", "jobs", "x", "p", "--cron", "0 9 * * *"],
    );
    assert_eq!(crontab["cron"], "0 9 * * *", "{crontab}");
    json(&redis, &["schedule", "delete", "jobs", "x"]);
    assert!(fails(
        &redis,
        &["schedule", "put", "jobs", "x", "p", "--cron", "0 9 * *"]
    )
    .contains("invalid cron expression"));
    assert!(fails(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "x",
            "p",
            "--every",
            "1m",
            "--missed",
            "sometimes"
        ]
    )
    .contains("skip, once or all"));
}

#[test]
fn push_targets_are_set_shown_and_removed() {
    let redis = RedisServer::start();
    let set = json(
        &redis,
        &[
            "push",
            "set",
            "orders",
            "https://example.com/hook",
            "--header",
            "x-team: shop",
            "--timeout",
            "5s",
        ],
    );
    assert_eq!(
        (&set["url"], &set["timeout_ms"]),
        (&json!("https://example.com/hook"), &json!(5000))
    );
    assert_eq!(set["headers"]["x-team"], "shop");
    let key = set["signing_keys"][0].clone();
    assert!(key.as_str().is_some_and(|k| k.len() == 64), "{set}");
    // Setting it again keeps the key.
    let again = json(
        &redis,
        &["push", "set", "orders", "https://example.com/other"],
    );
    assert_eq!(again["signing_keys"][0], key);
    assert_eq!(
        json(&redis, &["push", "get", "orders"])["url"],
        "https://example.com/other"
    );
    assert_eq!(again["allow_message_urls"], json!([]));
    let allowing = json(
        &redis,
        &[
            "push",
            "set",
            "orders",
            "https://example.com/other",
            "--allow-message-url",
            "https://hooks.example.com/",
            "--allow-message-url",
            "http://10.1.2.3:8080",
        ],
    );
    assert_eq!(
        allowing["allow_message_urls"],
        json!(["https://hooks.example.com", "http://10.1.2.3:8080"])
    );
    assert!(fails(
        &redis,
        &[
            "push",
            "set",
            "orders",
            "https://example.com",
            "--allow-message-url",
            "https://x.com/path"
        ]
    )
    .contains("origin"));
    assert!(fails(
        &redis,
        &[
            "push",
            "set",
            "orders",
            "https://example.com",
            "--header",
            "Host: other"
        ]
    )
    .contains("Host"));
    json(&redis, &["push", "remove", "orders"]);
    assert!(fails(&redis, &["push", "get", "orders"]).contains("no push target"));
    assert!(fails(&redis, &["push", "set", "orders", "ftp://x/y"]).contains("http"));
}
