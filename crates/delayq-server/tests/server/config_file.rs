//! `delayq serve --config FILE`: the file's settings apply, a flag wins over the file, a
//! setting that is not a flag is refused by name, and the example in `deploy/` starts.

use std::path::Path;
use std::process::Command;

use redis_fixture::RedisServer;
use reqwest::StatusCode;
use serde_json::json;

use crate::serve::Serve;

fn batch_of(n: usize) -> serde_json::Value {
    json!({ "messages": (0..n).map(|i| json!({ "payload": i })).collect::<Vec<_>>() })
}

fn write_config(dir: &Path, text: &str) -> String {
    let path = dir.join("delayq.toml");
    std::fs::write(&path, text).expect("write config");
    path.to_string_lossy().into_owned()
}

#[tokio::test]
async fn the_files_settings_apply_and_a_flag_wins_over_them() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = write_config(
        dir.path(),
        &format!("redis-url = \"{}\"\nmax_batch = 2\n", redis.url()),
    );
    let serve = Serve::start(&["--config", &config], &[]).await;
    let (status, body) = serve.post("/v1/queues/q/batch", batch_of(3)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "batch_too_large");
    assert_eq!(
        serve.post("/v1/queues/q/batch", batch_of(2)).await.0,
        StatusCode::OK
    );
    drop(serve);

    let serve = Serve::start(&["--config", &config, "--max-batch", "5"], &[]).await;
    assert_eq!(
        serve.post("/v1/queues/q/batch", batch_of(3)).await.0,
        StatusCode::OK
    );
}

#[tokio::test]
async fn the_environment_wins_over_the_file() {
    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let text = format!(
        "redis-url = \"{}\"\ntokens = \"admin:file-token-0123456789\"\n",
        redis.url()
    );
    let config = write_config(dir.path(), &text);
    let serve = Serve::start(
        &["--config", &config],
        &[("DELAYQ_TOKENS", "admin:env-token-0123456789")],
    )
    .await;
    let status_with = |token: &'static str| {
        let request = serve
            .http
            .get(format!("{}/v1/queues", serve.base))
            .bearer_auth(token);
        async move { request.send().await.expect("request").status() }
    };
    assert_eq!(status_with("env-token-0123456789").await, StatusCode::OK);
    assert_eq!(
        status_with("file-token-0123456789").await,
        StatusCode::UNAUTHORIZED
    );
}

#[test]
fn a_setting_that_is_not_a_flag_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (text, named) in [
        ("max-bach = 2\n", "max-bach"),
        ("max-batch = [1, 2]\n", "max-batch"),
        ("fsync-always = \"yes\"\n", "fsync-always"),
        ("listen = \n", "TOML"),
    ] {
        let config = write_config(dir.path(), text);
        let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["serve", "--config", &config, "--listen", "127.0.0.1:1"])
            .env_remove("DELAYQ_REDIS_URL")
            .output()
            .expect("run delayq serve");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text:?}: {stderr}");
        assert!(stderr.contains(named), "{text:?}: {stderr}");
    }
}

#[test]
fn a_claim_spacing_over_the_longest_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args([
            "serve",
            "--claim-spacing",
            "101ms",
            "--listen",
            "127.0.0.1:1",
        ])
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .expect("run delayq serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--claim-spacing is at most 100ms"),
        "{stderr}"
    );
}

#[test]
fn a_look_ahead_over_the_longest_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["serve", "--look-ahead", "2s", "--listen", "127.0.0.1:1"])
        .env_remove("DELAYQ_REDIS_URL")
        .output()
        .expect("run delayq serve");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("--look-ahead is at most 1s"), "{stderr}");
}

#[tokio::test]
async fn the_example_config_in_deploy_starts_a_server() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/delayq.toml");
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "admin:an-admin-token-0123456789\n").expect("tokens");
    let data = dir.path().join("data");
    let serve = Serve::start(
        &[
            "--config",
            example,
            "--data-dir",
            &data.to_string_lossy(),
            "--tokens-file",
            &tokens.to_string_lossy(),
        ],
        &[],
    )
    .await;
    let resp = serve
        .http
        .get(format!("{}/v1/queues", serve.base))
        .bearer_auth("an-admin-token-0123456789")
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::OK);
    serve.terminate();
}
