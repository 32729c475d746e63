//! The Kubernetes base in deploy/kubernetes, walked without a cluster (CI has none; its
//! manifests are validated against the Kubernetes schemas in .ci/run): the container's
//! arguments with the ConfigMap's delayq.toml, the Secret's tokens file and the Redis URL run
//! the real binary; its readiness command passes, its liveness path answers without a token;
//! and the grace period leaves room for preStop and the longest long poll.

use std::process::Command;

use reqwest::StatusCode;

use crate::serve::Serve;

const KUBE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/kubernetes");
const MONITOR: &str = "monitor-token-0123456789";

/// The flow-style list after `key:` in the manifest (`args: ["serve", ...]`), which is JSON.
fn list(manifest: &str, key: &str) -> Vec<String> {
    let line = manifest
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {key} in the manifest"));
    serde_json::from_str(line.trim()).expect("a JSON-style list")
}

/// The number after `key:` (YAML) or `key =` (TOML), seconds as `"20s"` too.
fn number(text: &str, key: &str) -> u64 {
    text.lines()
        .map(str::trim)
        .find_map(|l| {
            let rest = l.strip_prefix(key)?.trim_start();
            rest.strip_prefix(':').or_else(|| rest.strip_prefix('='))
        })
        .and_then(|v| {
            v.trim()
                .trim_matches('"')
                .trim_end_matches('s')
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("no {key}"))
}

#[tokio::test]
async fn the_deployment_serves_with_its_config_and_passes_its_probes() {
    let manifest = std::fs::read_to_string(format!("{KUBE}/deployment.yaml")).expect("manifest");
    let config = std::fs::read_to_string(format!("{KUBE}/delayq.toml")).expect("config");
    let args = list(&manifest, "args");
    assert_eq!(args[..2], ["serve", "--config"]);
    assert_eq!(
        args[2], "/etc/delayq/config/delayq.toml",
        "the ConfigMap's mount"
    );
    assert!(config.contains("tokens-file = \"/etc/delayq/tokens/tokens\""));

    // The mounts, here: the config as the ConfigMap holds it, the Secret's tokens file.
    let redis = redis_fixture::RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("monitor:{MONITOR}\n")).expect("tokens");
    let tokens = tokens.display().to_string();
    let config_path = format!("{KUBE}/delayq.toml");
    let serve = Serve::start(
        &["--config", &config_path, "--tokens-file", &tokens],
        &[("DELAYQ_REDIS_URL", &redis.url())],
    )
    .await;
    let listen = serve.base.trim_start_matches("http://").to_owned();

    let mut readiness = list(&manifest, "command");
    assert_eq!(readiness[..2], ["/usr/local/bin/delayq", "health"]);
    for (flag, here) in [
        ("--tokens-file", tokens.as_str()),
        ("--listen", listen.as_str()),
    ] {
        let at = readiness.iter().position(|a| a == flag).expect("the flag") + 1;
        readiness[at] = here.to_owned();
    }
    let ready = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(&readiness[1..])
        .env_remove("DELAYQ_TOKEN")
        .env_remove("DELAYQ_URL")
        .output()
        .expect("the readiness command");
    assert!(
        ready.status.success(),
        "{}",
        String::from_utf8_lossy(&ready.stderr)
    );

    assert!(manifest.contains("path: /healthz"));
    let alive = serve
        .http
        .get(format!("{}/healthz", serve.base))
        .send()
        .await;
    assert_eq!(alive.expect("healthz").status(), StatusCode::OK);

    // A stop: preStop's sleep, then SIGTERM with long polls of up to max-wait still held
    // (answered empty at once) and requests finishing: all within the grace period.
    let grace = number(&manifest, "terminationGracePeriodSeconds");
    let pre_stop = list(&manifest, "command");
    let sleep: Vec<String> = manifest
        .lines()
        .skip_while(|l| !l.contains("preStop:"))
        .find_map(|l| l.trim().strip_prefix("command:").map(str::to_owned))
        .map(|l| serde_json::from_str(l.trim()).expect("preStop's command"))
        .expect("a preStop command");
    assert_ne!(sleep, pre_stop, "preStop has its own command");
    let slept: u64 = sleep[1].parse().expect("seconds");
    let max_wait = number(&config, "max-wait");
    assert!(
        grace >= slept + max_wait + 10,
        "grace {grace} s < preStop {slept} s + max-wait {max_wait} s + 10 s"
    );
    serve.terminate();
}
