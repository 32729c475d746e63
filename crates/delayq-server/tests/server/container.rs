//! The container image as deploy/Dockerfile makes it, walked without a Docker daemon (CI has
//! none): its environment, entrypoint, command and health check, read from the Dockerfile
//! and run as written against the binary under test (the listen address kept on loopback,
//! /data a temporary directory). The server comes up on its embedded Redis, the health check
//! passes, and the CLI works with the image's environment and no flags.

use std::collections::HashMap;
use std::process::Command;

use reqwest::StatusCode;

use crate::serve::Serve;

const DOCKERFILE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../deploy/Dockerfile");
const ADMIN: &str = "admin-token-0123456789";

/// The Dockerfile's instructions, continuation lines joined, comments left out.
fn instructions() -> Vec<String> {
    let text = std::fs::read_to_string(DOCKERFILE).expect("deploy/Dockerfile");
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(part) => current.push_str(part),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current));
            }
        }
    }
    out
}

/// The JSON array after `prefix` in the instruction that starts with it.
fn exec_form(instructions: &[String], prefix: &str) -> Vec<String> {
    let found = instructions
        .iter()
        .filter_map(|i| i.strip_prefix(prefix))
        .next_back()
        .unwrap_or_else(|| panic!("no {prefix} in the Dockerfile"));
    let array = &found[found.find('[').expect("exec form")..];
    serde_json::from_str(array).expect("a JSON array")
}

#[tokio::test]
async fn the_image_serves_passes_its_health_check_and_runs_the_cli_without_flags() {
    let instructions = instructions();
    let entrypoint = exec_form(&instructions, "ENTRYPOINT ");
    let cmd = exec_form(&instructions, "CMD ");
    let health = exec_form(&instructions, "HEALTHCHECK ");
    assert_eq!(entrypoint, ["/usr/local/bin/delayq"]);
    assert_eq!(cmd, ["serve"], "Serve runs `delayq serve`");
    assert_eq!(health[0], entrypoint[0]);
    assert!(instructions.iter().any(|i| i == "WORKDIR /data"));
    assert!(instructions.iter().any(|i| i == "VOLUME /data"));
    let mut env: HashMap<String, String> = instructions
        .iter()
        .filter_map(|i| i.strip_prefix("ENV "))
        .flat_map(|pairs| pairs.split_whitespace())
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(
        env.get("DELAYQ_DATA_DIR").map(String::as_str),
        Some("/data")
    );

    // /data and the mounted secret, here.
    let root = tempfile::tempdir().expect("tempdir");
    let data = root.path().join("data");
    std::fs::create_dir(&data).expect("data");
    let tokens = root.path().join("tokens");
    std::fs::write(&tokens, format!("admin:{ADMIN}\n")).expect("tokens");
    env.insert("DELAYQ_DATA_DIR".into(), data.display().to_string());
    env.insert("DELAYQ_TOKENS_FILE".into(), tokens.display().to_string());
    env.remove("DELAYQ_LISTEN"); // Serve listens on a free loopback port
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let serve = Serve::start(&[], &pairs).await;
    let listen = serve.base.trim_start_matches("http://").to_owned();
    env.insert("DELAYQ_LISTEN".into(), listen);

    let run = |args: &[String]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_delayq"));
        command.args(args).current_dir(&data);
        for (name, _) in std::env::vars() {
            if name.starts_with("DELAYQ_") {
                command.env_remove(name);
            }
        }
        command.envs(&env).output().expect("delayq")
    };
    let checked = run(&health[1..]);
    assert!(
        checked.status.success(),
        "the health check: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let words = |s: &str| s.split(' ').map(str::to_owned).collect::<Vec<_>>();
    let sent = run(&words("send orders hello"));
    assert!(
        sent.status.success(),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    let stats = run(&words("stats orders --json"));
    assert!(
        stats.status.success(),
        "{}",
        String::from_utf8_lossy(&stats.stderr)
    );
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("JSON");
    assert_eq!(stats["ready"], 1, "{stats}");

    // The server sees what the CLI sent: one Redis.
    let answer = serve
        .http
        .get(format!("{}/v1/queues/orders", serve.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("stats");
    assert_eq!(answer.status(), StatusCode::OK);
    let body: serde_json::Value = answer.json().await.expect("JSON");
    assert_eq!(body["ready"], 1, "{body}");
}
