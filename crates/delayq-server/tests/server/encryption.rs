//! Payloads encrypted at rest, as an operator runs it: `delayq keys new` writes the key
//! file, `delayq serve --keys-file` holds the key, `PATCH /v1/queues/{queue}` turns
//! `encryption` on; then over real HTTP every answer shows the payload as sent while Redis
//! holds no byte of it in clear, a listing says it is encrypted without showing it, and a
//! server without the key refuses sends (503 `no_encryption_key`) and makes what it takes a
//! dead letter that says why, which a server with the key shows opened and requeues.

use std::process::Command;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::serve::Serve;
use crate::ui::{csrf_in, form_client, page_as, post_form, session_cookie};

const SECRET: &str = "pan-4111111111111111";

async fn patch(serve: &Serve, path: &str, body: Value) -> (StatusCode, Value) {
    let resp = serve
        .http
        .patch(format!("{}{path}", serve.base))
        .json(&body)
        .send()
        .await
        .expect("request");
    read(resp).await
}

/// Every value Redis holds, read raw by type.
fn everything_in(redis: &RedisServer) -> String {
    let values = redis.every_value_read().into_iter().map(|(_, value)| value);
    values.collect::<Vec<_>>().join("\n")
}

#[tokio::test]
async fn a_queue_that_encrypts_keeps_no_payload_in_clear_and_a_server_without_the_key_loses_none() {
    let dir = tempfile_dir();
    let made = Command::new(env!("CARGO_BIN_EXE_delayq"))
        .args(["keys", "new", "--id", "k1"])
        .output()
        .expect("delayq keys new");
    assert!(made.status.success());
    let keys_file = dir.join("keys");
    std::fs::write(&keys_file, &made.stdout).expect("the key file");
    let redis = RedisServer::start();
    let keys_arg = keys_file.to_str().expect("a path");
    let keyed = Serve::start(&["--redis-url", &redis.url(), "--keys-file", keys_arg], &[]).await;
    let (status, queue) = patch(&keyed, "/v1/queues/billing", json!({ "encryption": true })).await;
    assert_eq!(status, StatusCode::OK, "{queue}");
    assert_eq!(queue["encryption"], true);
    for (n, id) in ["inv-1", "inv-2"].iter().enumerate() {
        let body = json!({ "id": id, "payload": { "n": n, "card": SECRET } });
        let (status, sent) = keyed.post("/v1/queues/billing/messages", body).await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
    }
    assert!(
        !everything_in(&redis).contains(SECRET),
        "a payload in clear in Redis"
    );
    let (_, got) = keyed.get("/v1/queues/billing/messages/inv-1").await;
    assert_eq!(got["payload"]["card"], SECRET);
    assert_eq!(got["encrypted"], json!({ "key": "k1", "opened": true }));
    let (_, listed) = keyed.get("/v1/queues/billing/messages?state=ready").await;
    let first = &listed["messages"][0];
    assert_eq!(
        first["encrypted"],
        json!({ "key": "k1", "opened": false }),
        "{listed}"
    );
    assert!(!listed.to_string().contains(SECRET));

    // A server started without the key: sends are refused, nothing written; what it takes
    // becomes a dead letter that says why.
    let keyless = Serve::start(&["--redis-url", &redis.url()], &[]).await;
    let (status, refused) = keyless
        .post("/v1/queues/billing/messages", json!({ "payload": SECRET }))
        .await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "no_encryption_key");
    let (status, taken) = keyless
        .post(
            "/v1/queues/billing/receive",
            json!({ "max": 10, "wait": "0s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{taken}");
    assert_eq!(
        taken["deliveries"].as_array().map(Vec::len),
        Some(0),
        "{taken}"
    );
    let (_, dead) = keyed.get("/v1/queues/billing/dead").await;
    let letters = dead["dead_letters"].as_array().cloned().unwrap_or_default();
    assert_eq!(letters.len(), 2, "{dead}");
    for letter in &letters {
        assert_eq!(letter["last_error"], "undecryptable: no key k1");
        assert_eq!(
            letter["payload"]["card"], SECRET,
            "opened by the server with the key"
        );
    }
    let (_, unopened) = keyless.get("/v1/queues/billing/messages/inv-1").await;
    assert_eq!(
        unopened["encrypted"],
        json!({ "key": "k1", "opened": false, "error": "undecryptable: no key k1" })
    );
    assert!(!everything_in(&redis).contains(SECRET));
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("delayq-keys-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temp dir");
    dir
}

/// A key file's worth of one key, `k1`.
fn one_key() -> delayq::Keyring {
    delayq::Keyring::parse(&delayq::Keyring::new_key_line("k1").expect("line")).expect("keys")
}

const ADMIN: &str = "admin-secret-0123456789abcdef";

/// An in-process server with `limits`, key `k1` and one admin token, [`ADMIN`].
async fn keyed_admin(limits: Limits) -> TestServer {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    TestServer::start_keyed(one_key(), limits, tokens).await
}

#[tokio::test]
async fn rotate_keys_seals_over_http_what_was_stored_in_clear_and_the_cli_runs_it_too() {
    let mut s = keyed_admin(Limits::default()).await;
    s.token = Some(ADMIN.into());
    for n in 0..3 {
        let body = json!({ "payload": { "n": n, "card": SECRET }, "delay": "10m" });
        let (status, sent) = s.post("/v1/queues/late/messages", body).await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
    }
    let (status, _) = s
        .call(
            Method::PATCH,
            "/v1/queues/late",
            Some(json!({ "encryption": true })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        everything_in(&s.redis).contains(SECRET),
        "stored before: in clear"
    );
    let (status, done) = s.post("/v1/queues/late/rotate-keys", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(
        done,
        json!({ "queue": "late", "key": "k1", "resealed": 3, "changed": 0, "unopened": 0, "in_flight": 0 })
    );
    assert!(!everything_in(&s.redis).contains(SECRET));
    let (_, audit) = s.get("/v1/audit?queue=late&limit=1").await;
    assert_eq!(audit["entries"][0]["action"], "rotate_keys", "{audit}");
    // The CLI asks the server (which holds the key): nothing left to do.
    // Run off the test's runtime, which serves the request the command makes.
    let base = s.base.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(["keys", "rotate", "late", "--url", &base, "--token", ADMIN])
            .output()
            .expect("delayq keys rotate")
    })
    .await
    .expect("the command ran");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("late: 0 sealed again with key k1"),
        "{text}"
    );
    // A server without keys cannot rotate.
    let mut keyless = s.start_beside(Limits::default()).await;
    keyless.token = Some(ADMIN.into());
    let (status, refused) = keyless.post("/v1/queues/late/rotate-keys", json!({})).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}");
    assert_eq!(refused["error"]["code"], "no_encryption_key");
}

#[tokio::test]
async fn the_dashboard_turns_encryption_on_says_a_payload_is_encrypted_and_rotates() {
    let mut s = keyed_admin(Limits::default()).await;
    let cookie = session_cookie(&s, ADMIN).await;
    let http = form_client();
    let page = page_as(&http, &s, &cookie, "/ui/queues/shop").await;
    assert!(page.contains("Payloads are stored in clear."), "{page}");
    let act = format!("{}/ui/queues/shop/act", s.base);
    let csrf = csrf_in(&page);
    let on = post_form(
        &http,
        &act,
        Some(&cookie),
        &[("csrf", &csrf), ("action", "encryption_on")],
    )
    .await;
    assert_eq!(on.status(), StatusCode::SEE_OTHER);
    s.token = Some(ADMIN.into());
    let body = json!({ "id": "o-1", "payload": SECRET, "delay": "10m" });
    let (status, sent) = s.post("/v1/queues/shop/messages", body).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let page = page_as(&http, &s, &cookie, "/ui/queues/shop?state=delayed").await;
    assert!(page.contains("Payloads are encrypted at rest."), "{page}");
    assert!(page.contains("encrypted (key k1)"), "{page}");
    assert!(!page.contains(SECRET), "a listing never shows it");
    let message = page_as(&http, &s, &cookie, "/ui/queues/shop/messages/o-1").await;
    assert!(
        message.contains("at rest, with key k1; shown opened"),
        "{message}"
    );
    assert!(message.contains(SECRET), "the message page shows it opened");
    let rotate = post_form(
        &http,
        &act,
        Some(&cookie),
        &[("csrf", &csrf), ("action", "rotate_keys")],
    )
    .await;
    assert_eq!(rotate.status(), StatusCode::SEE_OTHER);
    let to = rotate.headers()["location"]
        .to_str()
        .expect("a location")
        .to_owned();
    let page = page_as(&http, &s, &cookie, &to).await;
    assert!(page.contains("0 sealed again with key k1"), "{to}: {page}");
}

#[tokio::test]
async fn a_pushed_message_and_its_own_push_headers_are_sealed_at_rest_and_pushed_opened() {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let mut s = keyed_admin(limits).await;
    s.token = Some(ADMIN.into());
    let target = crate::receiver::Receiver::start().await;
    let settings = json!({ "encryption": true });
    let (status, _) = s
        .call(Method::PATCH, "/v1/queues/pushed", Some(settings))
        .await;
    assert_eq!(status, StatusCode::OK);
    let hook = json!({ "url": format!("{}/hook", target.url) });
    let (status, body) = s
        .call(Method::PUT, "/v1/queues/pushed/push", Some(hook))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let message = json!({ "id": "m", "payload": { "card": SECRET }, "delay": "2s",
                          "push": { "headers": { "x-api-key": "HEADER-SECRET-VALUE" } } });
    let (status, sent) = s.post("/v1/queues/pushed/messages", message).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let stored = everything_in(&s.redis);
    assert!(
        !stored.contains(SECRET) && !stored.contains("HEADER-SECRET"),
        "in clear in Redis"
    );
    wait_until(std::time::Duration::from_secs(10), "the push", || async {
        !target.for_id("m").is_empty()
    })
    .await;
    let pushed = &target.for_id("m")[0];
    assert!(
        String::from_utf8_lossy(&pushed.body).contains(SECRET),
        "pushed opened"
    );
    assert_eq!(pushed.header("x-api-key"), "HEADER-SECRET-VALUE");
}

#[tokio::test]
async fn an_http_consumers_new_payload_for_the_next_attempt_is_sealed_too() {
    let mut s = keyed_admin(Limits::default()).await;
    s.token = Some(ADMIN.into());
    let (status, _) = s
        .call(
            Method::PATCH,
            "/v1/queues/retried",
            Some(json!({ "encryption": true })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let first = json!({ "id": "n-1", "payload": { "attempt": 1 } });
    assert_eq!(
        s.post("/v1/queues/retried/messages", first).await.0,
        StatusCode::CREATED
    );
    let got = receive(&s, "retried", 1, "2s").await;
    let receipt = got[0]["receipt"].as_str().expect("a receipt").to_owned();
    assert!(
        receipt[24..].starts_with('E'),
        "a sealed message's receipt: {receipt}"
    );
    let nack = json!({ "receipt": receipt, "error": "declined", "retry_after": "0s",
                       "payload": { "attempt": 2, "card": SECRET } });
    let (status, body) = s.post("/v1/queues/retried/nack", nack).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(
        !everything_in(&s.redis).contains(SECRET),
        "the new payload in clear"
    );
    let again = receive(&s, "retried", 1, "5s").await;
    assert_eq!(again[0]["payload"], json!({ "attempt": 2, "card": SECRET }));
}

#[tokio::test]
async fn rotating_the_keys_of_a_queue_never_used_writes_nothing() {
    let mut s = keyed_admin(Limits::default()).await;
    s.token = Some(ADMIN.into());
    let before = queue_data_dumped(&s.redis);
    let (status, done) = s.post("/v1/queues/never-used/rotate-keys", json!({})).await;
    assert_eq!(status, StatusCode::OK, "{done}");
    assert_eq!(done["resealed"], 0);
    assert_eq!(
        queue_data_dumped(&s.redis),
        before,
        "the queue was made by a rotation"
    );
}
