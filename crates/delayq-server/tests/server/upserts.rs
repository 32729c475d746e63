//! Upserts over HTTP and the CLI: `on_duplicate` replace and debounce (with `max_wait`) on a
//! JSON or raw send and in a batch, `if_in_flight`, the nack of a superseded delivery, and
//! bad combinations answered with 400 and nothing written.

use reqwest::StatusCode;
use serde_json::json;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;

use crate::cli::{fails, json as cli_json};
use crate::common::*;
use crate::ui::{page_as, session_cookie};

const ADMIN: &str = "admin-token-0123456789";

async fn stats(s: &TestServer, queue: &str) -> [u64; 3] {
    let (status, st) = s.get(&format!("/v1/queues/{queue}")).await;
    assert_eq!(status, StatusCode::OK, "{st}");
    let n = |k: &str| st[k].as_u64().unwrap_or(0);
    [n("delayed"), n("ready"), n("in_flight")]
}

#[tokio::test]
async fn a_debounced_search_index_update_runs_once_with_the_latest_payload() {
    let s = TestServer::start().await;
    let update = |v: u64| {
        json!({ "payload": { "doc": 7, "version": v }, "id": "reindex-doc-7", "delay": "5s",
                "on_duplicate": "debounce", "max_wait": "30s" })
    };
    let (status, first) = s.post("/v1/queues/search/messages", update(1)).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    assert!(first.get("replaced").is_none(), "{first}");
    let first_due = first["due_ms"].as_u64().expect("due");
    for v in 2..=5 {
        let (status, sent) = s.post("/v1/queues/search/messages", update(v)).await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
        assert_eq!(sent["replaced"], "delayed");
        assert!(sent["due_ms"].as_u64().expect("due") >= first_due);
    }
    assert_eq!(stats(&s, "search").await, [1, 0, 0]);
    let (_, got) = s.get("/v1/queues/search/messages/reindex-doc-7").await;
    assert_eq!(got["payload"]["version"], 5);
    let until = got["debounce_until_ms"].as_u64().expect("debounced");
    assert_eq!(
        until,
        first_due - 5_000 + 30_000,
        "30 s after the first send"
    );

    // As a raw body, options in the query: the max wait bounds it (10 ms after the first
    // send, long passed): due now.
    let resp = s
        .http
        .post(format!(
            "{}/v1/queues/search/messages?id=raw-1&delay=1h&on_duplicate=debounce&max_wait=10ms",
            s.base
        ))
        .header("content-type", "application/octet-stream")
        .body("r1")
        .send()
        .await
        .expect("send");
    let (status, raw) = read(resp).await;
    assert_eq!(status, StatusCode::CREATED, "{raw}");
    let due = raw["due_ms"].as_u64().expect("due");
    assert!(
        due < first_due + 1_000,
        "capped by the 10 ms max wait: {raw}"
    );
}

#[tokio::test]
async fn a_replace_of_a_message_in_flight_sends_another_or_is_refused() {
    let s = TestServer::start().await;
    let docs = "/v1/queues/docs/messages";
    s.post(docs, json!({ "payload": 1, "id": "d1" })).await;
    let held = receive(&s, "docs", 1, "0s").await;
    let refuse = json!({ "payload": 2, "id": "d1",
        "on_duplicate": "replace", "if_in_flight": "refuse" });
    let (status, refused) = s.post(docs, refuse).await;
    assert_eq!(status, StatusCode::OK, "a duplicate: {refused}");
    assert_eq!(refused["duplicate"], true);
    assert_eq!(stats(&s, "docs").await, [0, 0, 1]);

    let replace = json!({ "payload": 3, "id": "d1", "on_duplicate": "replace" });
    let (status, another) = s.post(docs, replace).await;
    assert_eq!(status, StatusCode::CREATED, "{another}");
    assert_eq!(another["replaced"], "in_flight");
    assert_eq!(stats(&s, "docs").await, [0, 1, 1]);
    let (_, nacked) = s
        .post(
            "/v1/queues/docs/nack",
            json!({ "receipt": held[0]["receipt"], "error": "boom" }),
        )
        .await;
    assert_eq!(nacked, json!({ "outcome": "superseded" }));
    let next = receive(&s, "docs", 10, "0s").await;
    assert_eq!(next.len(), 1);
    assert_eq!(
        (&next[0]["id"], &next[0]["payload"]),
        (&json!("d1"), &json!(3))
    );

    // In a batch, each message its own way.
    let (status, batch) = s
        .post(
            "/v1/queues/docs/batch",
            json!({ "messages": [
                { "payload": 4, "id": "d1", "on_duplicate": "replace" },
                { "payload": 5, "id": "d2", "on_duplicate": "replace" },
            ] }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{batch}");
    assert_eq!(batch["results"][0]["replaced"], "in_flight");
    assert!(batch["results"][1].get("replaced").is_none(), "{batch}");
}

#[tokio::test]
async fn upsert_options_that_mean_nothing_are_refused_with_nothing_written() {
    let s = TestServer::start().await;
    let cases = [
        json!({ "payload": 1, "on_duplicate": "replace" }),
        json!({ "payload": 1, "id": "x", "on_duplicate": "debounce" }),
        json!({ "payload": 1, "id": "x", "max_wait": "5s" }),
        json!({ "payload": 1, "id": "x", "on_duplicate": "replace", "max_wait": "5s" }),
        json!({ "payload": 1, "id": "x", "if_in_flight": "refuse" }),
        json!({ "payload": 1, "id": "x", "on_duplicate": "debounce", "max_wait": "0s" }),
    ];
    for body in cases {
        let answer = s.post("/v1/queues/bad/messages", body.clone()).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_option");
    }
    let answer = s
        .post(
            "/v1/queues/bad/messages",
            json!({ "payload": 1, "id": "x", "on_duplicate": "upsert" }),
        )
        .await;
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{}", answer.1);
    assert_eq!(stats(&s, "bad").await, [0, 0, 0]);
}

#[test]
fn the_cli_sends_upserts() {
    let redis = RedisServer::start();
    cli_json(
        &redis,
        &["send", "jobs", "v1", "--id", "j1", "--delay", "1h"],
    );
    let sent = cli_json(
        &redis,
        &[
            "send",
            "jobs",
            "v2",
            "--id",
            "j1",
            "--delay",
            "1h",
            "--on-duplicate",
            "debounce",
            "--max-wait",
            "1m",
        ],
    );
    assert_eq!(sent["replaced"], "delayed", "{sent}");
    // `--json` is GET's answer: a text payload is bytes, in base64.
    let got = cli_json(&redis, &["get", "jobs", "j1"]);
    assert_eq!(got["payload_base64"], "djI=", "{got}");
    let refused = fails(
        &redis,
        &[
            "send",
            "jobs",
            "v3",
            "--id",
            "j1",
            "--on-duplicate",
            "debounce",
        ],
    );
    assert!(refused.contains("max_wait"), "{refused}");
}

#[tokio::test]
async fn the_dashboard_shows_how_long_a_message_may_be_debounced() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let body = json!({ "payload": 1, "id": "m1", "delay": "5s",
        "on_duplicate": "debounce", "max_wait": "30s" });
    let (status, _) = s.post("/v1/queues/ui/messages", body).await;
    assert_eq!(status, StatusCode::CREATED);
    let http = crate::ui::form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let message = page_as(&http, &s, &admin, "/ui/queues/ui/messages/m1").await;
    assert!(message.contains("id=\"debounce-until\""), "{message}");
}

/// Issue 49, item 6: within one batch an upsert of an id given earlier in it applies as if
/// the messages were sent one after the other: the later one wins.
#[tokio::test]
async fn within_one_batch_the_later_upsert_of_an_id_wins() {
    let s = TestServer::start().await;
    let batch = json!({ "messages": [
        { "payload": 4, "id": "bx", "delay": "1h", "on_duplicate": "replace" },
        { "payload": 5, "id": "bx", "delay": "2h", "on_duplicate": "replace" },
        // A plain send after them is the winner's duplicate.
        { "payload": 6, "id": "bx", "delay": "3h" },
        { "payload": 1, "id": "db", "delay": "1h", "on_duplicate": "debounce", "max_wait": "10m" },
        { "payload": 2, "id": "db", "delay": "1h", "on_duplicate": "debounce", "max_wait": "10m" },
    ] });
    let (status, sent) = s.post("/v1/queues/batched/batch", batch).await;
    assert!(status.is_success(), "{sent}");
    let results = sent["results"].as_array().cloned().unwrap_or_default();
    assert_eq!(results.len(), 5, "{sent}");
    assert_ne!(results[1]["duplicate"], true, "{sent}");
    assert_eq!(results[1]["replaced"], "delayed", "{sent}");
    assert_eq!(results[2]["duplicate"], true, "{sent}");
    assert_eq!(results[2]["due_ms"], results[1]["due_ms"], "{sent}");
    assert_ne!(results[4]["duplicate"], true, "{sent}");

    let (_, bx) = s.get("/v1/queues/batched/messages/bx").await;
    assert_eq!(bx["payload"], 5, "{bx}");
    assert_eq!(bx["due_ms"], results[1]["due_ms"]);
    let (_, db) = s.get("/v1/queues/batched/messages/db").await;
    assert_eq!(db["payload"], 2, "{db}");
    // A debounce keeps the max wait of the first send it replaced: due within 10 minutes.
    assert_eq!(db["due_ms"], db["debounce_until_ms"], "{db}");
    assert_eq!(stats(&s, "batched").await, [2, 0, 0], "one message per id");
}
