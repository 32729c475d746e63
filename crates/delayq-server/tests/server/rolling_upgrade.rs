//! A rolling deploy with two builds at once: `delayq serve` of the release before (it reads
//! only data format 1) and of this one (the newest format), on one Redis, sending and consuming the
//! same queue. The rule (`formats.rs` in the library): the new build writes what format 1
//! allows while an older process is announced, and the upgrade is refused until none is;
//! then an old process that starts is refused with a clear error, and nothing is written.
//! Throughout, every message is delivered once.
//!
//! "The release before" is this source built with `DELAYQ_NEWEST_FORMAT=1`, in a target
//! directory of its own (`<target>/format1`): built by the first test that needs it, in a
//! few minutes (`.ci/run` builds it before the tests, so that no test waits for it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;
use crate::serve::Serve;

/// The `delayq` binary of the release before: reads data formats up to 1.
fn previous_release() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let tmp = Path::new(env!("CARGO_TARGET_TMPDIR"));
        let target = tmp.parent().unwrap_or(tmp).join("format1");
        let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut child = Command::new(cargo)
            .args(["build", "-q", "-p", "delayq-server", "--bin", "delayq"])
            .arg("--target-dir")
            .arg(&target)
            .env("DELAYQ_NEWEST_FORMAT", "1")
            .current_dir(workspace)
            .spawn()
            .expect("run cargo build");
        let deadline = std::time::Instant::now() + Duration::from_secs(20 * 60);
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for cargo") {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("building the previous release took over 20 minutes");
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        assert!(status.success(), "building the previous release failed");
        target.join("debug/delayq")
    })
}

/// `delayq ARGS` of build `binary` against `redis`.
fn admin(binary: &Path, redis: &RedisServer, args: &[&str]) -> Output {
    Command::new(binary)
        .args(args)
        .env("DELAYQ_REDIS_URL", redis.url())
        .output()
        .expect("run delayq")
}

fn this_release() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_delayq"))
}

async fn send(server: &Serve, id: &str) {
    let (status, body) = server
        .post(
            "/v1/queues/orders/messages",
            json!({ "payload": id, "id": id }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "send {id}: {body}");
}

/// Receives what is ready through `server` and acks it; counts each id in `seen`.
async fn drain(server: &Serve, seen: &mut BTreeMap<String, usize>) -> usize {
    let (status, body) = server
        .post(
            "/v1/queues/orders/receive",
            json!({ "max": 20, "lease": "30s", "wait": "100ms" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "receive: {body}");
    let deliveries = body["deliveries"].as_array().cloned().unwrap_or_default();
    for d in &deliveries {
        let id = d["id"].as_str().expect("id").to_owned();
        let (status, body) = server
            .post("/v1/queues/orders/ack", json!({ "receipt": d["receipt"] }))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "ack {id}: {body}");
        *seen.entry(id).or_default() += 1;
    }
    deliveries.len()
}

fn format_of(redis: &RedisServer) -> Value {
    let out = admin(
        this_release(),
        redis,
        &["format", "show", "orders", "--json"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[tokio::test]
async fn two_builds_share_a_queue_through_a_rolling_upgrade() {
    let previous = previous_release();
    let redis = RedisServer::start();
    let url = redis.url();
    let args = ["--redis-url", url.as_str()];
    let old = Serve::start_binary(previous, &args, &[]).await;
    let new = Serve::start(&args, &[]).await;
    let mut sent = Vec::new();
    let mut seen = BTreeMap::new();

    // Both builds send and consume the queue; the old one made it, in format 1.
    for i in 0..40 {
        let id = format!("o-{i}");
        send(if i % 2 == 0 { &old } else { &new }, &id).await;
        sent.push(id);
    }
    drain(&old, &mut seen).await;
    drain(&new, &mut seen).await;
    let (status, processes) = new.get("/v1/processes").await;
    assert_eq!(status, StatusCode::OK, "{processes}");
    let formats: Vec<u64> = processes["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["newest_format"].as_u64().expect("format"))
        .collect();
    assert_eq!(
        formats.iter().filter(|f| **f == 1).count(),
        1,
        "{processes}"
    );
    assert!(
        formats.contains(&u64::from(delayq::DATA_FORMAT)),
        "{processes}"
    );
    assert_eq!(format_of(&redis)["queues"][0]["format"], 1);

    // The upgrade waits while the old build runs, and says which process it waits for.
    let refused = admin(this_release(), &redis, &["format", "upgrade", "orders"]);
    assert!(!refused.status.success());
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("reads up to format 1"), "{why}");
    let (status, body) = new.post("/v1/queues/orders/upgrade", json!({})).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("older_processes")),
        "{body}"
    );
    assert_eq!(format_of(&redis)["queues"][0]["format"], 1);

    // The old build goes (its announcement with it); the upgrade goes ahead, with messages
    // waiting and in flight.
    for i in 40..60 {
        let id = format!("o-{i}");
        send(&old, &id).await;
        sent.push(id);
    }
    old.terminate();
    let (status, held) = new
        .post(
            "/v1/queues/orders/receive",
            json!({ "max": 5, "lease": "30s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{held}");
    let upgraded = admin(
        this_release(),
        &redis,
        &["format", "upgrade", "orders", "--json"],
    );
    assert!(
        upgraded.status.success(),
        "{}",
        String::from_utf8_lossy(&upgraded.stderr)
    );
    let shown = format_of(&redis);
    assert_eq!(
        (
            shown["queues"][0]["format"].as_u64(),
            shown["queues"][0]["current"].as_bool()
        ),
        (Some(u64::from(delayq::DATA_FORMAT)), Some(true)),
        "{shown}"
    );
    for d in held["deliveries"].as_array().expect("deliveries") {
        let (status, _) = new
            .post("/v1/queues/orders/ack", json!({ "receipt": d["receipt"] }))
            .await;
        assert_eq!(status, StatusCode::NO_CONTENT);
        *seen
            .entry(d["id"].as_str().expect("id").to_owned())
            .or_default() += 1;
    }

    // The old build, started again, is refused on the upgraded queue, and writes nothing
    // there; its admin commands say why.
    let old = Serve::start_binary(previous, &args, &[]).await;
    let before = redis.every_key_dumped("dq:{orders}*");
    let (status, body) = old
        .post("/v1/queues/orders/messages", json!({ "payload": "late" }))
        .await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("newer_data_format")),
        "{body}"
    );
    let (status, body) = old
        .post(
            "/v1/queues/orders/receive",
            json!({ "max": 5, "lease": "30s" }),
        )
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
    let stats = admin(previous, &redis, &["stats", "orders"]);
    let why = String::from_utf8_lossy(&stats.stderr);
    assert!(
        !stats.status.success() && why.contains("upgrade this process"),
        "{why}"
    );
    assert_eq!(
        redis.every_key_dumped("dq:{orders}*"),
        before,
        "the old build wrote"
    );

    // The new build delivers the rest: each message once.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while seen.len() < sent.len() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "delivered {seen:?} of {sent:?}"
        );
        drain(&new, &mut seen).await;
    }
    assert!(seen.values().all(|n| *n == 1), "delivered twice: {seen:?}");
    sent.sort();
    assert_eq!(seen.into_keys().collect::<Vec<_>>(), sent);
}
