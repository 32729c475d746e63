//! The alert rules' runbook commands, run as on-call runs them (issue 50, item 9): every
//! `delayq ...` command quoted in `deploy/prometheus/delayq-alerts.yml`, with the alert's
//! labels filled in, from a machine with no access to Redis (`DELAYQ_URL` and
//! `DELAYQ_TOKEN` set to a server and an admin token), must run and exit 0.

use std::process::Command;

use redis_fixture::RedisServer;
use serde_json::json;

use crate::serve::Serve;

const ADMIN: &str = "admin-token-runbook-0123456789";

/// Every backquoted `delayq ...` command of `text`.
fn commands(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| span.starts_with("delayq "))
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_command_the_alert_rules_name_runs_against_a_server() {
    let rules = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/prometheus/delayq-alerts.yml"
    ))
    .expect("the alert rules");
    let found = commands(&rules);
    assert!(found.len() >= 8, "the rules name commands: {found:?}");

    let redis = RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("admin:{ADMIN}\n")).expect("tokens");
    let tokens = tokens.display().to_string();
    let serve = Serve::start(
        &[
            "--redis-url",
            &redis.url(),
            "--tokens-file",
            &tokens,
            "--push-allow",
            "127.0.0.1/32",
        ],
        &[],
    )
    .await;
    let call = |path: &str, body: serde_json::Value| {
        serve
            .http
            .post(format!("{}{path}", serve.base))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };
    // What the alerts are about: a dead letter, a message held, a push target.
    for id in ["dies", "held"] {
        let sent = call(
            "/v1/queues/orders/messages",
            json!({ "payload": 1, "id": id }),
        );
        assert!(sent.await.expect("send").status().is_success());
    }
    let received: serde_json::Value = call("/v1/queues/orders/receive", json!({ "max": 2 }))
        .await
        .expect("receive")
        .json()
        .await
        .expect("JSON");
    let dies = received["deliveries"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["id"] == "dies")
        .expect("delivered");
    let nack = json!({ "receipt": dies["receipt"], "error": "boom", "dead": true });
    assert!(call("/v1/queues/orders/nack", nack)
        .await
        .expect("nack")
        .status()
        .is_success());
    let target = serve
        .http
        .put(format!("{}/v1/queues/orders/push", serve.base))
        .bearer_auth(ADMIN)
        .json(&json!({ "url": "http://127.0.0.1:9/hook" }))
        .send()
        .await
        .expect("push target");
    assert!(target.status().is_success());

    let instance = serve.base.trim_start_matches("http://");
    let empty = dir.path().join("no-data-here");
    for command in found {
        let line = command
            .replace("{{ $labels.queue }}", "orders")
            .replace("{{ $labels.instance }}", instance);
        let mut words = line.split_whitespace();
        assert_eq!(words.next(), Some("delayq"));
        let mut run = Command::new(env!("CARGO_BIN_EXE_delayq"));
        run.args(words);
        for (name, _) in std::env::vars() {
            if name.starts_with("DELAYQ_") {
                run.env_remove(name);
            }
        }
        let out = run
            .env("DELAYQ_URL", &serve.base)
            .env("DELAYQ_TOKEN", ADMIN)
            .env("DELAYQ_DATA_DIR", &empty)
            .output()
            .expect("run delayq");
        assert!(
            out.status.success() && !out.stdout.is_empty(),
            "`{line}` (from the alert rules) failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
