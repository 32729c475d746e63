//! The dashboard's events: an admin turns recording on and off with the queue page's form (a
//! read-only session cannot); the queue page's feed shows what happens as it happens, in a
//! real browser; a message's page shows its timeline.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::browser::Browser;
use crate::common::*;
use crate::ui::{csrf_in, form_client, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-0123456789";
const SEND: &str = "send-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

async fn secured() -> TestServer {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    s
}

#[tokio::test]
async fn an_admin_turns_events_on_and_off_from_the_queue_page() {
    let s = secured().await;
    let http = form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let page = page_as(&http, &s, &admin, "/ui/queues/feed").await;
    assert!(page.contains("id=\"events-off\""), "{page}");
    let act = format!("{}/ui/queues/feed/act", s.base);
    let resp = post_form(
        &http,
        &act,
        Some(&admin),
        &[
            ("action", "events"),
            ("csrf", &csrf_in(&page)),
            ("limit", ""),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, stats) = s.get("/v1/queues/feed").await;
    assert_eq!(stats["events_max"], json!(delayq::DEFAULT_EVENTS_KEPT));

    s.post(
        "/v1/queues/feed/messages",
        json!({ "payload": 1, "id": "m1", "delay": "1h" }),
    )
    .await;
    let page = page_as(&http, &s, &admin, "/ui/queues/feed").await;
    assert!(page.contains("data-kind=\"sent\" data-id=\"m1\""), "{page}");
    let message = page_as(&http, &s, &admin, "/ui/queues/feed/messages/m1").await;
    assert!(message.contains("id=\"timeline\""), "{message}");

    // A read-only session may look, not change it.
    let reader = session_cookie(&s, SEND).await;
    let page = page_as(&http, &s, &reader, "/ui/queues/feed").await;
    assert!(!page.contains("events-setting"), "{page}");
    let resp = post_form(
        &http,
        &act,
        Some(&reader),
        &[("action", "events_off"), ("csrf", &csrf_in(&page))],
    )
    .await;
    assert!(resp.status().is_client_error(), "{}", resp.status());
    let (_, stats) = s.get("/v1/queues/feed").await;
    assert_eq!(stats["events"], json!(1));

    let page = page_as(&http, &s, &admin, "/ui/queues/feed").await;
    let resp = post_form(
        &http,
        &act,
        Some(&admin),
        &[("action", "events_off"), ("csrf", &csrf_in(&page))],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, stats) = s.get("/v1/queues/feed").await;
    assert_eq!(
        (&stats["events"], &stats["events_max"]),
        (&json!(0), &json!(null))
    );
    s.shutdown().await;
}

#[tokio::test]
async fn the_queue_page_follows_events_live_in_a_real_browser() {
    let s = secured().await;
    let (status, _) = s
        .call(
            reqwest::Method::PATCH,
            "/v1/queues/live",
            Some(json!({ "events": {} })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let browser = Browser::start().await;
    crate::ui::login(&browser, &s.base, ADMIN).await;
    browser.wait_for("#queues", WAIT).await;
    browser.goto(&format!("{}/ui/queues/live", s.base)).await;
    browser.wait_for("#events", WAIT).await;
    // The page's script is following the stream before the message is sent.
    wait_until(WAIT, "the page to follow the events", || async {
        s.redis
            .cli(&["PUBSUB", "SHARDNUMSUB", "dq:{live}:events"])
            .lines()
            .nth(1)
            .is_some_and(|n| n.trim() == "1")
    })
    .await;
    s.post(
        "/v1/queues/live/messages",
        json!({ "payload": 1, "id": "live-1" }),
    )
    .await;
    let got = receive(&s, "live", 1, "1s").await;
    s.post(
        "/v1/queues/live/ack",
        json!({ "receipt": got[0]["receipt"] }),
    )
    .await;
    browser
        .wait_for("#events tr[data-kind=acked][data-id=live-1]", WAIT)
        .await;
    let text = browser.text("#events tbody").await;
    assert!(
        text.contains("delivered") && text.contains("attempt 1"),
        "{text}"
    );
    browser.screenshot("queue-events").await;

    browser.click("#events tr[data-kind=acked] a").await;
    let timeline = browser.wait_for_text("#timeline", "acked", WAIT).await;
    assert!(
        timeline.contains("sent") && timeline.contains("delivered"),
        "{timeline}"
    );
    browser.screenshot("message-timeline").await;
    // The message is gone (acked), so its page is a 404 that still shows its timeline:
    // Chromium logs that status, and nothing else may be logged.
    let errors = browser.console_errors().await;
    assert!(
        errors
            .iter()
            .all(|e| e.contains("/messages/live-1") && e.contains("404")),
        "{errors:?}"
    );
    browser.close().await;
    s.shutdown().await;
}
