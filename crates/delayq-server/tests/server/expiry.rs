//! Expiry over HTTP: `ttl` and `expires_at` on a send (JSON and raw), a queue's
//! `default_ttl` and `on_expire`, the nack that expires, the metric, the dashboard's form and
//! message page, and bad input answered with 400 and nothing written.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;

use crate::common::*;
use crate::ui::{csrf_in, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-0123456789";

async fn send(s: &TestServer, queue: &str, body: serde_json::Value) -> serde_json::Value {
    let (status, sent) = s.post(&format!("/v1/queues/{queue}/messages"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    sent
}

/// Lets a deadline `ms` from now pass.
async fn past(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms + 20)).await;
}

#[tokio::test]
async fn a_message_past_its_ttl_is_never_delivered_and_is_counted() {
    let s = TestServer::start().await;
    send(
        &s,
        "orders",
        json!({ "payload": 1, "id": "late", "ttl": "50ms" }),
    )
    .await;
    send(
        &s,
        "orders",
        json!({ "payload": 2, "id": "on-time", "ttl": "1h" }),
    )
    .await;
    past(50).await;
    let got = receive(&s, "orders", 10, "0s").await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"], "on-time");
    let due = got[0]["due_ms"].as_u64().expect("due");
    assert_eq!(got[0]["expires_at_ms"].as_u64(), Some(due + 3_600_000));

    let (status, late) = s.get("/v1/queues/orders/messages/late").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        (&late["state"], &late["last_error"]),
        (&json!("dead"), &json!("expired"))
    );

    let (_, text) = s.get_text("/metrics").await;
    assert!(
        text.contains("delayq_messages_expired_total{queue=\"orders\"} 1"),
        "{text}"
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_raw_send_takes_its_deadline_in_the_query_and_a_late_retry_expires() {
    let s = TestServer::start().await;
    let resp = s
        .http
        .post(format!(
            "{}/v1/queues/hooks/messages?id=raw-1&expires_at=2099-01-01T00:00:00Z",
            s.base
        ))
        .header("content-type", "application/octet-stream")
        .body("bytes")
        .send()
        .await
        .expect("send");
    assert_eq!(resp.status(), StatusCode::CREATED);
    let (_, raw) = s.get("/v1/queues/hooks/messages/raw-1").await;
    assert_eq!(raw["expires_at_ms"].as_u64(), Some(4_070_908_800_000));

    send(
        &s,
        "hooks",
        json!({ "payload": "x", "id": "hook", "ttl": "2s" }),
    )
    .await;
    let got = receive(&s, "hooks", 10, "0s").await;
    let hook = got.iter().find(|d| d["id"] == "hook").expect("the hook");
    let (status, body) = s
        .post(
            "/v1/queues/hooks/nack",
            json!({ "receipt": hook["receipt"], "error": "503", "retry_after": "10s" }),
        )
        .await;
    assert_eq!(
        (status, body),
        (StatusCode::OK, json!({ "outcome": "expired" }))
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_queues_default_ttl_and_on_expire_are_set_over_http() {
    let s = TestServer::start().await;
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/fresh",
            Some(json!({ "default_ttl": "50ms", "on_expire": "drop" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        (&stats["default_ttl_ms"], &stats["on_expire"]),
        (&json!(50), &json!("drop"))
    );
    send(&s, "fresh", json!({ "payload": 1, "id": "stale" })).await;
    past(50).await;
    assert!(receive(&s, "fresh", 10, "0s").await.is_empty());
    let (status, _) = s.get("/v1/queues/fresh/messages/stale").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "dropped: nothing kept");

    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/fresh",
            Some(json!({ "default_ttl": null, "on_expire": "dead_letter" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        (&stats["default_ttl_ms"], &stats["on_expire"]),
        (&json!(null), &json!("dead_letter"))
    );
    for bad in [
        json!({ "on_expire": "forget" }),
        json!({ "default_ttl": "soon" }),
        json!({ "default_ttl": 0 }),
    ] {
        let refused = s.call(Method::PATCH, "/v1/queues/fresh", Some(bad)).await;
        assert_eq!(refused.0, StatusCode::BAD_REQUEST, "{}", refused.1);
    }
    s.shutdown().await;
}

#[tokio::test]
async fn bad_deadlines_are_refused_with_nothing_written() {
    let s = TestServer::start().await;
    for (bad, code) in [
        (json!({ "payload": 1, "ttl": "0s" }), "invalid_option"),
        (json!({ "payload": 1, "ttl": "later" }), "invalid_duration"),
        (
            json!({ "payload": 1, "ttl": "1h", "expires_at": "2099-01-01T00:00:00Z" }),
            "invalid_option",
        ),
        (
            json!({ "payload": 1, "expires_at": "2001-01-01T00:00:00Z" }),
            "invalid_option",
        ),
        (
            json!({ "payload": 1, "delay": "2h", "expires_at": now_plus_ms(60_000) }),
            "invalid_option",
        ),
    ] {
        let refused = s.post("/v1/queues/bad/messages", bad.clone()).await;
        assert_error(&refused, StatusCode::BAD_REQUEST, code);
    }
    let (_, stats) = s.get("/v1/queues/bad").await;
    assert_eq!((&stats["ready"], &stats["delayed"]), (&json!(0), &json!(0)));
    s.shutdown().await;
}

fn now_plus_ms(ms: u64) -> u64 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_millis() as u64;
    now + ms
}

#[tokio::test]
async fn the_dashboard_sets_expiry_and_shows_a_messages_deadline() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    send(&s, "ui", json!({ "payload": 1, "id": "m1", "ttl": "1h" })).await;
    let http = crate::ui::form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let message = page_as(&http, &s, &admin, "/ui/queues/ui/messages/m1").await;
    assert!(message.contains("id=\"expires\""), "{message}");
    let page = page_as(&http, &s, &admin, "/ui/queues/ui").await;
    assert!(page.contains("id=\"expired\""), "{page}");
    let resp = post_form(
        &http,
        &format!("{}/ui/queues/ui/act", s.base),
        Some(&admin),
        &[
            ("action", "expiry"),
            ("csrf", &csrf_in(&page)),
            ("ttl", "10m"),
            ("on_expire", "drop"),
            ("max_delay", "30d"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, stats) = s.get("/v1/queues/ui").await;
    assert_eq!(
        (
            &stats["default_ttl_ms"],
            &stats["on_expire"],
            &stats["max_delay_ms"]
        ),
        (&json!(600_000), &json!("drop"), &json!(2_592_000_000u64))
    );
    s.shutdown().await;
}

#[tokio::test]
async fn a_queues_max_delay_refuses_sends_further_out_with_400() {
    let s = TestServer::start().await;
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/bounded",
            Some(json!({ "max_delay": "1h" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["max_delay_ms"], 3_600_000);
    for body in [
        json!({ "payload": 1, "delay": "2h" }),
        json!({ "payload": 1, "delay": "2h", "id": "c1" }),
    ] {
        let refused = s.post("/v1/queues/bounded/messages", body).await;
        assert_error(&refused, StatusCode::BAD_REQUEST, "invalid_schedule");
    }
    let refused = s
        .post(
            "/v1/queues/bounded/batch",
            json!({ "messages": [{ "payload": 1 }, { "payload": 2, "delay": "3h" }] }),
        )
        .await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "invalid_schedule");
    let (_, stats) = s.get("/v1/queues/bounded").await;
    assert_eq!((&stats["ready"], &stats["delayed"]), (&json!(0), &json!(0)));
    send(&s, "bounded", json!({ "payload": 1, "delay": "30m" })).await;
    let (status, stats) = s
        .call(
            Method::PATCH,
            "/v1/queues/bounded",
            Some(json!({ "max_delay": null })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(stats["max_delay_ms"], json!(null));
    s.shutdown().await;
}
