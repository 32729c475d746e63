//! Lists and searches over HTTP: every state a page at a time with previews, a payload search
//! in steps, bad queries refused, and any valid token may read.

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;

/// Every message of `state` through `next` cursors, `limit` a page.
async fn list_all(s: &TestServer, queue: &str, state: &str, limit: usize) -> Vec<Value> {
    let mut out = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..100 {
        let mut path = format!("/v1/queues/{queue}/messages?state={state}&limit={limit}");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let (status, page) = s.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{page}");
        let messages = page["messages"].as_array().expect("messages");
        assert!(messages.len() <= limit);
        out.extend(messages.iter().cloned());
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return out,
        }
    }
    panic!("the list did not end");
}

#[tokio::test]
async fn each_state_lists_with_previews_and_a_search_finds_payloads() {
    let s = TestServer::start().await;
    let long = "x".repeat(500);
    for i in 0..12 {
        let note = if i % 4 == 0 { "card declined" } else { "paid" };
        let (status, sent) = s
            .post(
                "/v1/queues/shop/messages",
                json!({ "payload": { "order": i, "note": note }, "delay": format!("{}m", 10 + i), "id": format!("order-{i}") }),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
    }
    let (status, _) = s
        .post(
            "/v1/queues/shop/messages",
            json!({ "payload": long, "id": "long" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);

    let delayed = list_all(&s, "shop", "delayed", 5).await;
    let ids: Vec<&str> = delayed
        .iter()
        .map(|m| m["id"].as_str().expect("id"))
        .collect();
    let want: Vec<String> = (0..12).map(|i| format!("order-{i}")).collect();
    assert_eq!(ids, want, "delayed, in due order");
    assert_eq!(delayed[0]["payload_kind"], "json");
    assert_eq!(
        delayed[0]["payload_preview"],
        r#"{"note":"card declined","order":0}"#
    );
    assert_eq!(delayed[0]["state"], "delayed");

    let ready = list_all(&s, "shop", "ready", 5).await;
    assert_eq!(ready.len(), 1);
    assert_eq!(
        ready[0]["payload_bytes"], 502,
        "the JSON string with its quotes"
    );
    assert_eq!(
        ready[0]["payload_preview"].as_str().expect("text").len(),
        200,
        "a preview is cut to 200 bytes"
    );
    assert!(list_all(&s, "shop", "dead", 5).await.is_empty());
    assert!(list_all(&s, "shop", "in_flight", 5).await.is_empty());

    // A search, a step at a time: 12 delayed messages looked at 5 per step.
    let mut found = Vec::new();
    let mut path = "/v1/queues/shop/messages?state=delayed&contains=declined&limit=5".to_owned();
    let mut scanned = 0;
    loop {
        let (status, step) = s.get(&path).await;
        assert_eq!(status, StatusCode::OK, "{step}");
        scanned += step["scanned"].as_u64().expect("scanned");
        for m in step["messages"].as_array().expect("messages") {
            found.push(m["id"].as_str().expect("id").to_owned());
        }
        match step["next"].as_str() {
            Some(next) => {
                path = format!(
                    "/v1/queues/shop/messages?state=delayed&contains=declined&limit=5&cursor={next}"
                )
            }
            None => break,
        }
    }
    assert_eq!(found, ["order-0", "order-4", "order-8"]);
    assert_eq!(scanned, 12);
}

#[tokio::test]
async fn bad_list_queries_are_refused() {
    let s = TestServer::start().await;
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": 1, "delay": "1h" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    for (query, code) in [
        ("state=sleeping", "invalid_option"),
        ("state=delayed&limit=0", "invalid_option"),
        ("state=delayed&limit=1001", "invalid_option"),
        ("state=delayed&cursor=nonsense", "invalid_option"),
        ("state=delayed&contains=", "invalid_option"),
        (
            "state=dead&cursor=0000000000000000000000000a",
            "invalid_option",
        ),
    ] {
        let answer = s.get(&format!("/v1/queues/q/messages?{query}")).await;
        assert_error(&answer, StatusCode::BAD_REQUEST, code);
    }
    let answer = s.get("/v1/queues/q/messages").await;
    assert_eq!(answer.0, StatusCode::BAD_REQUEST, "no state: {}", answer.1);
    let answer = s
        .get("/v1/queues/q/messages?state=delayed&surprise=1")
        .await;
    assert_eq!(
        answer.0,
        StatusCode::BAD_REQUEST,
        "unknown parameter: {}",
        answer.1
    );
    let answer = s.get("/v1/queues/bad%20name/messages?state=delayed").await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_queue_name");
}

#[tokio::test]
async fn any_valid_token_may_list_and_none_may_not() {
    const SEND: &str = "send-token-0123456789";
    let tokens = Tokens::parse(&format!("send:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    let answer = s.get("/v1/queues/q/messages?state=ready").await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    s.token = Some(SEND.into());
    let (status, page) = s.get("/v1/queues/q/messages?state=ready").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["messages"], json!([]));
    assert_eq!(page["next"], Value::Null);
}

/// Issue 49, item 5: a step loads a bounded number of bytes of records, whatever the
/// payloads' sizes: with 1 MiB payloads a page of 12 stops after a few (its budget is
/// 4 MiB) and says where to go on, and following it lists every message, in order, across
/// priorities. The dead letters' list and the admin's page of them likewise.
#[tokio::test]
async fn a_step_loads_a_bounded_number_of_bytes_and_goes_on_from_there() {
    let s = TestServer::start().await;
    // Just under the largest payload (1 MiB).
    let big = "b".repeat(1024 * 1024 - 1024);
    for i in 0..12 {
        let sent = s
            .post(
                "/v1/queues/heavy/messages",
                json!({ "payload": big, "id": format!("m{i:02}"), "delay": format!("{}s", 100 + i),
                        "priority": if i % 2 == 0 { 2 } else { 7 } }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    let (status, first) = s
        .get("/v1/queues/heavy/messages?state=delayed&limit=12")
        .await;
    assert_eq!(status, StatusCode::OK);
    let n = first["messages"].as_array().map_or(0, Vec::len);
    assert!(
        (1..=5).contains(&n),
        "one step returned {n} messages of 1 MiB"
    );
    assert!(
        first["next"].is_string(),
        "{n} messages, next {}",
        first["next"]
    );
    let all = list_all(&s, "heavy", "delayed", 12).await;
    let ids: Vec<&str> = all.iter().filter_map(|m| m["id"].as_str()).collect();
    let expected: Vec<String> = (0..12).map(|i| format!("m{i:02}")).collect();
    assert_eq!(ids, expected, "every message, in order of due time");

    // Ready ones, in the priorities' sets (the delayed ones above wait in buckets).
    for i in 0..8 {
        let sent = s
            .post(
                "/v1/queues/heavy-ready/messages",
                json!({ "payload": big, "id": format!("r{i}"), "priority": if i % 2 == 0 { 2 } else { 7 } }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    let (_, first) = s
        .get("/v1/queues/heavy-ready/messages?state=ready&limit=8")
        .await;
    let n = first["messages"].as_array().map_or(0, Vec::len);
    assert!(
        (1..=5).contains(&n),
        "one step returned {n} ready messages of 1 MiB"
    );
    let all = list_all(&s, "heavy-ready", "ready", 8).await;
    let mut ids: Vec<&str> = all.iter().filter_map(|m| m["id"].as_str()).collect();
    let dues: Vec<u64> = all.iter().filter_map(|m| m["due_ms"].as_u64()).collect();
    assert!(
        dues.windows(2).all(|w| w[0] <= w[1]),
        "in order of due time: {dues:?}"
    );
    ids.sort_unstable();
    assert_eq!(ids, ["r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"]);

    for i in 0..6 {
        let sent = s
            .post(
                "/v1/queues/heavy-dead/messages",
                json!({ "payload": big, "id": format!("d{i}"), "max_attempts": 1 }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    for delivery in receive(&s, "heavy-dead", 6, "5s").await {
        let (status, _) = s
            .post(
                "/v1/queues/heavy-dead/nack",
                json!({ "receipt": delivery["receipt"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, first) = s
        .get("/v1/queues/heavy-dead/messages?state=dead&limit=6")
        .await;
    let n = first["messages"].as_array().map_or(0, Vec::len);
    assert!(
        (1..=5).contains(&n),
        "one step returned {n} dead letters of 1 MiB"
    );
    assert_eq!(list_all(&s, "heavy-dead", "dead", 6).await.len(), 6);
    let (status, page) = s.get("/v1/queues/heavy-dead/dead?limit=6").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let listed = page["dead_letters"].as_array().map_or(0, Vec::len);
    assert_eq!(
        listed,
        6,
        "the admin's page holds every dead letter: {}",
        page.to_string().len()
    );
}

/// Issue 49, item 5: dead letters are paged by where the last one seen died, not by an
/// offset, so a requeue between two steps skips no one.
#[tokio::test]
async fn dead_letters_page_by_cursor_and_a_requeue_between_steps_skips_no_one() {
    let s = TestServer::start().await;
    for i in 0..5 {
        let sent = s
            .post(
                "/v1/queues/graveyard/messages",
                json!({ "payload": i, "id": format!("d{i}"), "max_attempts": 1 }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED);
        // One at a time, so that they die in this order.
        let got = receive(&s, "graveyard", 1, "5s").await;
        let (status, _) = s
            .post(
                "/v1/queues/graveyard/nack",
                json!({ "receipt": got[0]["receipt"] }),
            )
            .await;
        assert_eq!(status, StatusCode::OK);
    }
    let ids = |page: &Value| -> Vec<String> {
        page["messages"]
            .as_array()
            .map(|m| {
                m.iter()
                    .filter_map(|m| m["id"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let (_, first) = s
        .get("/v1/queues/graveyard/messages?state=dead&limit=2")
        .await;
    assert_eq!(ids(&first), ["d0", "d1"]);
    let (status, _) = s
        .post("/v1/queues/graveyard/requeue", json!({ "id": "d0" }))
        .await;
    assert_eq!(status, StatusCode::OK);
    let next = first["next"].as_str().expect("more");
    let (_, second) = s
        .get(&format!(
            "/v1/queues/graveyard/messages?state=dead&limit=2&cursor={next}"
        ))
        .await;
    assert_eq!(ids(&second), ["d2", "d3"], "a requeue shifted the page");
}
