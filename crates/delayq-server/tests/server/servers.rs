//! `delayq serve` on the servers it supports: it runs Valkey where Valkey is all there is,
//! names the server it uses on /readyz, and refuses a Redis older than the minimum before
//! writing anything. The other servers come from `.ci/servers.sh`.

use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use crate::serve::Serve;
use redis_fixture::{cannot_run, tested_server, RedisServer, ServerConfig};

#[tokio::test]
async fn with_only_valkey_server_on_the_path_serve_runs_its_embedded_valkey() {
    let Some(valkey) = tested_server("valkey-9.1.2/valkey-server") else {
        return cannot_run(
            "with_only_valkey_server_on_the_path_serve_runs_its_embedded_valkey",
            "Valkey 9.1.2 is not in target/servers (run .ci/servers.sh)",
        );
    };
    // A PATH with valkey-server and nothing else that serve runs (it signals its server
    // with `kill`), as on a machine where only Valkey's package is installed.
    let bin = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::symlink(&valkey, bin.path().join("valkey-server")).expect("link");
    std::os::unix::fs::symlink("/bin/kill", bin.path().join("kill")).expect("link");
    let data = tempfile::tempdir().expect("tempdir");
    let data_dir = data.path().join("data");
    let path = bin.path().display().to_string();
    let serve = Serve::start_unset(
        &["--data-dir", &data_dir.display().to_string()],
        &[("PATH", &path)],
        &["DELAYQ_REDIS_SERVER"],
    )
    .await;
    let (status, ready) = serve.get("/readyz").await;
    assert_eq!(status, StatusCode::OK, "{ready}");
    assert_eq!(ready["server"]["kind"], "valkey", "{ready}");
    assert_eq!(ready["server"]["version"], "9.1.2", "{ready}");
    let (status, _) = serve
        .post("/v1/queues/v/messages", json!({ "payload": "on valkey" }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let (_, got) = serve
        .post("/v1/queues/v/receive", json!({ "wait": "5s" }))
        .await;
    assert_eq!(got["deliveries"][0]["payload"], "on valkey", "{got}");
    let log = serve.terminate();
    assert!(
        log.contains("Valkey 9.1.2"),
        "the server is named once in the log: {log}"
    );
}

#[test]
fn serve_refuses_a_redis_older_than_7_0_and_writes_nothing() {
    let Some(old) = tested_server("redis-6.2.14/redis-server") else {
        return cannot_run(
            "serve_refuses_a_redis_older_than_7_0_and_writes_nothing",
            "Redis 6.2.14 is not in target/servers (run .ci/servers.sh)",
        );
    };
    let mut config = ServerConfig::default();
    config.binary = Some(old);
    let redis = RedisServer::start_with(config);
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            &redis.url(),
        ])
        .output()
        .expect("run delayq serve");
    assert!(!out.status.success(), "serve ran on Redis 6.2");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("Redis 6.2.14") && err.contains("Redis 7.0.0"),
        "the error names the version found and the one needed: {err}"
    );
    assert_eq!(redis.cli(&["DBSIZE"]), "0", "nothing was written");
}
