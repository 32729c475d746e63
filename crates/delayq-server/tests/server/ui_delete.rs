//! Deleting a queue from the dashboard, in a real headless Chromium: the queue page's
//! button asks first, naming how many messages go with it; confirmed, the queue is gone from
//! the list and from Redis. A read-only session has no such button, and its forged form is
//! refused.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::browser::Browser;
use crate::common::*;
use crate::ui::{form_client, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-0123456789";
const SEND: &str = "send-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

#[tokio::test]
async fn the_queue_page_deletes_a_queue_after_naming_what_goes_with_it() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    for i in 0..3 {
        let sent = s
            .post(
                "/v1/queues/retiring/messages",
                json!({ "payload": i, "delay": "1h" }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED);
    }
    s.post("/v1/queues/staying/messages", json!({ "payload": 1 }))
        .await;

    // A read-only session sees no button, and its forged form changes nothing.
    let http = form_client();
    let reader = session_cookie(&s, SEND).await;
    let page = page_as(&http, &s, &reader, "/ui/queues/retiring").await;
    assert!(
        !page.contains("delete-queue"),
        "a read-only session has the button"
    );
    let forged = post_form(
        &http,
        &format!("{}/ui/queues/retiring/act", s.base),
        Some(&reader),
        &[("action", "delete_queue"), ("force", "1"), ("csrf", "x")],
    )
    .await;
    assert!(forged.status().is_client_error(), "{}", forged.status());
    assert_eq!(s.get("/v1/queues/retiring").await.1["delayed"], 3);

    let browser = Browser::start().await;
    crate::ui::login(&browser, &s.base, ADMIN).await;
    browser.wait_for("#queues", WAIT).await;
    browser
        .goto(&format!("{}/ui/queues/retiring", s.base))
        .await;
    browser.wait_for("#delete-queue", WAIT).await;
    browser.click("#delete-queue").await;
    let asked = browser
        .wait_for_text("#confirm-text", "holds 3 messages", WAIT)
        .await;
    assert!(asked.contains("deleted with it"), "{asked}");
    browser.screenshot("delete-queue-confirm").await;
    browser.click("#confirm").await;
    browser
        .wait_for_text(
            "[role=status]",
            "Deleted queue retiring (3 messages).",
            WAIT,
        )
        .await;
    let rows = browser
        .execute(
            "return [...document.querySelectorAll('tr[data-queue]')].map(r => r.dataset.queue);",
            vec![],
        )
        .await;
    assert_eq!(rows, json!(["staying"]));
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await;

    let (_, list) = s.get("/v1/queues").await;
    assert!(!list.to_string().contains("retiring"), "{list}");
    assert_eq!(s.get("/v1/queues/staying").await.1["ready"], 1);
}
