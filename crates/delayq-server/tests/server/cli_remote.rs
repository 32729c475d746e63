//! The CLI as on-call uses it (issue 50, items 9 and 14): every command over HTTP with
//! `--url` and `--token` (or `DELAYQ_URL`, `DELAYQ_TOKEN`), from a machine with no access to
//! Redis or the data dir; `--json` the HTTP API's own answers, the same in both modes; lists
//! by state with a cursor; cancel in bulk by ids, by state and by search; the processes
//! with when each was last seen.

use std::process::{Command, Output};

use redis_fixture::RedisServer;
use serde_json::{json, Value};

use crate::serve::Serve;

const ADMIN: &str = "admin-token-cli-remote-0123456789";
const SEND: &str = "send-token-cli-remote-0123456789";

/// A server with an admin and a send token on `redis`, and a scratch dir.
async fn server(redis: &RedisServer) -> (Serve, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("admin:{ADMIN}\nsend:{SEND}\n")).expect("tokens");
    let tokens = tokens.display().to_string();
    let serve = Serve::start(
        &["--redis-url", &redis.url(), "--tokens-file", &tokens],
        &[],
    )
    .await;
    (serve, dir)
}

/// `delayq ARGS` with nothing of Redis in reach: no Redis URL, an empty data dir; `env`
/// added (the server's URL and a token, as on-call sets them).
fn remote(empty: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_delayq"));
    command.args(args).arg("--data-dir").arg(empty);
    for (name, _) in std::env::vars() {
        if name.starts_with("DELAYQ_") {
            command.env_remove(name);
        }
    }
    command
        .envs(env.iter().copied())
        .output()
        .expect("run delayq")
}

/// Runs `args` with `--url` and the admin token; must succeed; its stdout.
#[track_caller]
fn admin(serve: &Serve, empty: &std::path::Path, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["--url", &serve.base, "--token", ADMIN]);
    let out = remote(empty, &[], &all);
    assert!(
        out.status.success(),
        "delayq {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// [`admin`] with `--json`, parsed.
#[track_caller]
fn admin_json(serve: &Serve, empty: &std::path::Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_str(&admin(serve, empty, &all)).expect("JSON")
}

/// `GET path` of the server as an admin.
async fn http_get(serve: &Serve, path: &str) -> Value {
    let answer = serve
        .http
        .get(format!("{}{path}", serve.base))
        .bearer_auth(ADMIN)
        .send()
        .await
        .expect("GET");
    assert!(answer.status().is_success(), "{path}: {}", answer.status());
    answer.json().await.expect("JSON")
}

/// The same local `--json` command as the remote one, on the Redis itself.
#[track_caller]
fn local_json(redis: &RedisServer, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(&all)
        .env("DELAYQ_REDIS_URL", redis.url())
        .env_remove("DELAYQ_URL")
        .output()
        .expect("run delayq");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// Fields that change from one reading to the next.
fn steady(mut v: Value) -> Value {
    if let Some(object) = v.as_object_mut() {
        object.remove("oldest_ready_lag_ms");
    }
    v
}

#[tokio::test]
async fn every_command_works_over_http_with_a_token_and_answers_as_the_api() {
    let redis = RedisServer::start();
    let (serve, dir) = server(&redis).await;
    let empty = dir.path().join("no-data-here");

    // Sent over HTTP by the CLI; got back the same three ways.
    let sent = admin_json(
        &serve,
        &empty,
        &[
            "send",
            "orders",
            r#"{"order":7}"#,
            "--json-payload",
            "--id",
            "close-7",
            "--delay",
            "1h",
        ],
    );
    assert_eq!(
        (&sent["id"], &sent["duplicate"]),
        (&json!("close-7"), &json!(false))
    );
    let remote_get = admin_json(&serve, &empty, &["get", "orders", "close-7"]);
    let http_get_answer = http_get(&serve, "/v1/queues/orders/messages/close-7").await;
    assert_eq!(
        remote_get, http_get_answer,
        "remote --json is the API's answer"
    );
    assert_eq!(
        local_json(&redis, &["get", "orders", "close-7"]),
        http_get_answer,
        "and so is local --json"
    );
    assert_eq!(remote_get["payload"], json!({ "order": 7 }));
    for (args, path) in [
        (vec!["stats", "orders"], "/v1/queues/orders"),
        (
            vec!["schedule", "list", "orders"],
            "/v1/queues/orders/schedules",
        ),
        (
            vec!["dead", "list", "orders"],
            "/v1/queues/orders/dead?offset=0&limit=100",
        ),
        (
            vec!["list", "orders", "--state", "delayed"],
            "/v1/queues/orders/messages?state=delayed",
        ),
    ] {
        let http = steady(http_get(&serve, path).await);
        assert_eq!(steady(admin_json(&serve, &empty, &args)), http, "{args:?}");
        assert_eq!(steady(local_json(&redis, &args)), http, "{args:?} locally");
    }

    // The environment's DELAYQ_URL and DELAYQ_TOKEN, as on-call exports them.
    let env = [("DELAYQ_URL", serve.base.as_str()), ("DELAYQ_TOKEN", ADMIN)];
    let table = remote(&empty, &env, &["stats"]);
    assert!(
        table.status.success(),
        "{}",
        String::from_utf8_lossy(&table.stderr)
    );
    assert!(String::from_utf8_lossy(&table.stdout).contains("orders"));

    // Settings, pause, processes: admin routes, over HTTP.
    let configured = admin(
        &serve,
        &empty,
        &["configure", "orders", "--max-delay", "30d"],
    );
    assert_eq!(configured.trim(), "orders: max delay 30days");
    assert!(admin(&serve, &empty, &["pause", "orders"]).contains("paused"));
    assert_eq!(http_get(&serve, "/v1/queues/orders").await["paused"], true);
    admin(&serve, &empty, &["resume", "orders"]);
    let processes = admin_json(&serve, &empty, &["processes"]);
    let answering: Vec<&Value> = processes["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .filter(|p| p["answering"] == true)
        .collect();
    assert_eq!(answering.len(), 1, "the server that answered: {processes}");
    assert_eq!(answering[0]["role"], "server", "{processes}");
    assert!(answering[0]["seen_ms_ago"]
        .as_i64()
        .is_some_and(|ms| (0..=30_000).contains(&ms)));
    assert!(admin(&serve, &empty, &["processes"]).contains("(this one)"));

    // A lower role is refused what it may not do, with the API's reason; a wrong token too.
    let refused = remote(
        &empty,
        &[],
        &["stats", "--url", &serve.base, "--token", SEND],
    );
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && why.contains("forbidden"),
        "{why}"
    );
    let sent = remote(
        &empty,
        &[],
        &["send", "orders", "x", "--url", &serve.base, "--token", SEND],
    );
    assert!(sent.status.success(), "a send token sends");
    let wrong = remote(
        &empty,
        &[],
        &["queues", "--url", &serve.base, "--token", "nope"],
    );
    let why = String::from_utf8_lossy(&wrong.stderr);
    assert!(
        !wrong.status.success() && why.contains("unauthorized"),
        "{why}"
    );
    // Over loopback the token goes as is; to another host over plain http it goes with a
    // warning (TLS belongs in front); an address that is not http(s) is refused.
    let quiet = remote(
        &empty,
        &[],
        &["queues", "--url", &serve.base, "--token", ADMIN],
    );
    assert!(
        quiet.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&quiet.stderr)
    );
    let far = remote(
        &empty,
        &[],
        &["queues", "--url", "http://192.0.2.1:9", "--token", ADMIN],
    );
    let why = String::from_utf8_lossy(&far.stderr);
    assert!(why.contains("clear text"), "{why}");
    let odd = remote(&empty, &[], &["queues", "--url", "ftp://127.0.0.1"]);
    assert!(String::from_utf8_lossy(&odd.stderr).contains("http://"));
    let nowhere = remote(&empty, &[], &["queues", "--url", "http://127.0.0.1:9"]);
    let why = String::from_utf8_lossy(&nowhere.stderr);
    assert!(
        !nowhere.status.success() && why.contains("no answer"),
        "{why}"
    );
}

#[tokio::test]
async fn lists_page_with_a_cursor_and_cancel_works_in_bulk() {
    let redis = RedisServer::start();
    let (serve, dir) = server(&redis).await;
    let empty = dir.path().join("no-data-here");
    for i in 0..7 {
        let payload = if i % 2 == 0 { "refund" } else { "invoice" };
        admin(
            &serve,
            &empty,
            &[
                "send",
                "billing",
                &format!("{payload}-{i}"),
                "--id",
                &format!("b{i}"),
                "--delay",
                "1h",
            ],
        );
    }
    admin(&serve, &empty, &["send", "billing", "now", "--id", "r0"]);

    // Pages of 3, each going on from the one before's cursor: all 7, none twice.
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut args = vec!["list", "billing", "--state", "delayed", "--limit", "3"];
        if let Some(c) = &cursor {
            args.extend(["--cursor", c.as_str()]);
        }
        let page = admin_json(&serve, &empty, &args);
        for m in page["messages"].as_array().expect("messages") {
            seen.push(m["id"].as_str().expect("id").to_owned());
        }
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(seen.len() <= 7, "pages never end: {seen:?}");
    }
    seen.sort();
    assert_eq!(seen, ["b0", "b1", "b2", "b3", "b4", "b5", "b6"]);
    let table = admin(
        &serve,
        &empty,
        &["list", "billing", "--state", "delayed", "--limit", "3"],
    );
    assert!(table.contains("next: --cursor "), "{table}");

    // By search, dry run first: nothing cancelled.
    let dry = admin(
        &serve,
        &empty,
        &[
            "cancel",
            "billing",
            "--state",
            "delayed",
            "--contains",
            "refund",
            "--dry-run",
        ],
    );
    assert!(dry.contains("4 would be cancelled"), "{dry}");
    assert_eq!(http_get(&serve, "/v1/queues/billing").await["delayed"], 7);
    let searched = admin_json(
        &serve,
        &empty,
        &[
            "cancel",
            "billing",
            "--state",
            "delayed",
            "--contains",
            "refund",
        ],
    );
    assert_eq!(searched["cancelled"], 4, "{searched}");
    // By ids: one cancelled, one not found, one in flight left alone.
    let receipt = serve
        .http
        .post(format!("{}/v1/queues/billing/receive", serve.base))
        .bearer_auth(ADMIN)
        .json(&json!({ "max": 1 }))
        .send()
        .await
        .expect("receive");
    assert!(receipt.status().is_success());
    let by_ids = admin_json(&serve, &empty, &["cancel", "billing", "b1", "nope", "r0"]);
    let outcomes: Vec<(&str, &str)> = by_ids["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap_or(""),
                r["outcome"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [
            ("b1", "cancelled"),
            ("nope", "not_found"),
            ("r0", "not_cancelled")
        ]
    );
    // The rest by state.
    let rest = admin(&serve, &empty, &["cancel", "billing", "--state", "delayed"]);
    assert!(rest.contains("cancelled 2 of 2"), "{rest}");
    let stats = http_get(&serve, "/v1/queues/billing").await;
    assert_eq!(
        (&stats["delayed"], &stats["in_flight"]),
        (&json!(0), &json!(1))
    );

    // One id that cannot be cancelled: the API's error, one line.
    let one = remote(
        &empty,
        &[],
        &[
            "cancel",
            "billing",
            "r0",
            "--url",
            &serve.base,
            "--token",
            ADMIN,
        ],
    );
    let why = String::from_utf8_lossy(&one.stderr);
    assert!(
        !one.status.success() && why.contains("wrong_state"),
        "{why}"
    );
}
