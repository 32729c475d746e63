//! `delayq health`, the container image's health check: with no flags it asks the server of
//! this machine (`DELAYQ_LISTEN`) with a token of the server's tokens file
//! (`DELAYQ_TOKENS_FILE`), the environment the image gives both; exit 0 when `/readyz` says
//! ready, 1 (and why, on stderr) when Redis is away, the token is wrong, or no server answers.

use std::process::{Command, Output};

use crate::serve::Serve;

const MONITOR: &str = "monitor-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

/// `delayq health ARGS` with only `env` of delayq's variables set.
fn health(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_delayq"));
    cmd.arg("health").args(args);
    for (name, _) in std::env::vars() {
        if name.starts_with("DELAYQ_") {
            cmd.env_remove(name);
        }
    }
    cmd.envs(env.iter().copied())
        .output()
        .expect("delayq health")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test]
async fn health_asks_the_local_servers_readyz_with_a_token_of_its_tokens_file() {
    let mut redis = redis_fixture::RedisServer::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("admin:{ADMIN}\nmonitor:{MONITOR}\n")).expect("tokens");
    let file = tokens.display().to_string();
    let serve = Serve::start(&["--redis-url", &redis.url(), "--tokens-file", &file], &[]).await;
    let listen = serve.base.trim_start_matches("http://").to_owned();
    let env = [
        ("DELAYQ_LISTEN", listen.as_str()),
        ("DELAYQ_TOKENS_FILE", file.as_str()),
    ];

    let ready = health(&[], &env);
    assert!(ready.status.success(), "{}", text(&ready.stderr));
    assert!(
        text(&ready.stdout).contains("\"ready\""),
        "{}",
        text(&ready.stdout)
    );

    // A wildcard listen address is asked on loopback.
    let port = listen.rsplit(':').next().expect("a port");
    let wildcard = format!("0.0.0.0:{port}");
    let env_wild = [
        ("DELAYQ_LISTEN", wildcard.as_str()),
        ("DELAYQ_TOKENS_FILE", file.as_str()),
    ];
    assert!(health(&[], &env_wild).status.success());

    let refused = health(&["--token", "not-a-token-0123456789"], &env);
    assert_eq!(refused.status.code(), Some(1));
    assert!(
        text(&refused.stderr).contains("401"),
        "{}",
        text(&refused.stderr)
    );

    redis.kill();
    let away = health(&[], &env);
    assert_eq!(away.status.code(), Some(1));
    assert!(text(&away.stderr).contains("503"), "{}", text(&away.stderr));

    drop(serve);
    let gone = health(&[], &env);
    assert_eq!(gone.status.code(), Some(1));
    assert!(
        text(&gone.stderr).contains("no answer"),
        "{}",
        text(&gone.stderr)
    );
}
