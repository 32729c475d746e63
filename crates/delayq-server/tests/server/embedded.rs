//! The embedded Redis as `delayq serve` runs it: bounded by `maxmemory` (sends refused when
//! it is full, draining goes on), reached only through a unix socket in a private
//! directory, whatever the length of the data directory's path.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use crate::serve::Serve;

/// `redis-cli -s <the data dir's socket> ARGS` (the socket link followed).
fn cli(data: &Path, args: &[&str]) -> String {
    let socket = std::fs::canonicalize(data.join("redis.sock")).expect("a socket");
    let out = Command::new("redis-cli")
        .arg("-s")
        .arg(socket)
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn at_its_maxmemory_sends_are_refused_and_draining_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let serve = Serve::start(
        &[
            "--data-dir",
            data.to_str().expect("utf-8"),
            "--redis-maxmemory",
            "16mb",
        ],
        &[],
    )
    .await;
    let setting = |name: &str| {
        cli(&data, &["CONFIG", "GET", name])
            .lines()
            .nth(1)
            .map(str::to_owned)
    };
    assert_eq!(setting("maxmemory").as_deref(), Some("16777216"));
    assert_eq!(setting("maxmemory-policy").as_deref(), Some("noeviction"));
    let big = "x".repeat(100 * 1024);
    let mut sent = 0;
    let refusal = loop {
        let (status, body) = serve
            .post("/v1/queues/q/messages", json!({ "payload": big }))
            .await;
        if status != StatusCode::CREATED {
            break (status, body);
        }
        sent += 1;
        assert!(sent < 1_000, "16 MB never filled");
    };
    assert_eq!(refusal.0, StatusCode::SERVICE_UNAVAILABLE, "{}", refusal.1);
    assert_eq!(refusal.1["error"]["code"], "redis_full", "{}", refusal.1);
    assert!(sent > 0, "some sends went in first");
    // Receiving and acking work while Redis is full, and free memory: sends are taken again
    // long before the queue is drained. (How much must be freed varies by server: Redis 7.4
    // and later count the Lua VM, whose garbage comes and goes, in used_memory.)
    let mut drained = 0;
    loop {
        let (status, got) = serve
            .post("/v1/queues/q/receive", json!({ "max": 10 }))
            .await;
        assert_eq!(status, StatusCode::OK, "{got}");
        let deliveries = got["deliveries"].as_array().expect("deliveries");
        assert!(!deliveries.is_empty(), "nothing to receive after {drained}");
        let receipts: Vec<_> = deliveries.iter().map(|d| d["receipt"].clone()).collect();
        let (status, acked) = serve
            .post("/v1/queues/q/ack", json!({ "receipts": receipts }))
            .await;
        assert_eq!(status, StatusCode::OK, "{acked}");
        drained += receipts.len();
        let (status, body) = serve
            .post("/v1/queues/q/messages", json!({ "payload": big }))
            .await;
        if status == StatusCode::CREATED {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert!(
            drained < sent / 2,
            "still no room after draining {drained} of {sent}"
        );
    }
}

#[tokio::test]
async fn by_default_it_takes_a_share_of_the_machine_not_all_of_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let _serve = Serve::start(&["--data-dir", data.to_str().expect("utf-8")], &[]).await;
    let config = cli(&data, &["CONFIG", "GET", "maxmemory"]);
    let bytes: u64 = config
        .lines()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("maxmemory");
    let meminfo = std::fs::read_to_string("/proc/meminfo").expect("meminfo");
    let total_kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("MemTotal");
    assert!(
        bytes > 0 && bytes < total_kb * 1024,
        "maxmemory {bytes} of {total_kb} kB"
    );
    assert_eq!(
        cli(&data, &["CONFIG", "GET", "maxmemory-policy"])
            .lines()
            .nth(1),
        Some("noeviction")
    );
}

#[tokio::test]
async fn a_long_data_dir_still_gets_a_private_unix_socket_and_no_tcp_port() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("d".repeat(120));
    let data_arg = data.to_str().expect("utf-8");
    let serve = Serve::start(&["--data-dir", data_arg], &[]).await;
    assert_eq!(
        serve
            .post("/v1/queues/q/messages", json!({ "payload": 1 }))
            .await
            .0,
        StatusCode::CREATED
    );
    assert_eq!(
        cli(&data, &["CONFIG", "GET", "port"]).lines().nth(1),
        Some("0"),
        "no TCP port"
    );
    let socket = std::fs::canonicalize(data.join("redis.sock")).expect("socket");
    for private in [data.as_path(), socket.parent().expect("socket dir")] {
        let mode = std::fs::metadata(private)
            .expect("dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700, "{}", private.display());
    }
    // The CLI finds it as it finds a short one.
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["stats", "q", "--json", "--data-dir", data_arg])
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .expect("run delayq stats");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"ready\":1"));
}
