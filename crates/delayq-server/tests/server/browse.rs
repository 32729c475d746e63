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
