//! Cancelling in bulk from the dashboard (issue 50, item 9): a delayed or ready tab's
//! "Cancel all" and a search's "Cancel what this search found" ask first, naming what goes;
//! confirmed, those messages are cancelled and the rest stay. A read-only session has no
//! such button and its forged form is refused; a state that cannot be cancelled is a 400.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::StatusCode;
use serde_json::json;

use crate::browser::Browser;
use crate::common::*;
use crate::ui::{csrf_in, form_client, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-ui-cancel-0123456789";
const SEND: &str = "send-token-ui-cancel-0123456789";
const WAIT: Duration = Duration::from_secs(10);

/// A server with `billing`: four delayed messages (two of customer 42), one ready.
async fn billing() -> TestServer {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    for (id, customer) in [("b1", 42), ("b2", 7), ("b3", 42), ("b4", 9)] {
        let body = json!({ "payload": { "customer": customer }, "id": id, "delay": "1h" });
        let sent = s.post("/v1/queues/billing/messages", body).await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    let sent = s
        .post(
            "/v1/queues/billing/messages",
            json!({ "payload": 1, "id": "r1" }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED);
    s
}

#[tokio::test]
async fn forms_cancel_a_state_or_a_search_and_refuse_what_they_may_not() {
    let s = billing().await;
    let http = form_client();
    let act = format!("{}/ui/queues/billing/act", s.base);

    // A read-only session: no button, and a forged form changes nothing.
    let reader = session_cookie(&s, SEND).await;
    let page = page_as(&http, &s, &reader, "/ui/queues/billing?state=delayed").await;
    assert!(
        !page.contains("cancel-all"),
        "a read-only session has the button"
    );
    let forged = post_form(
        &http,
        &act,
        Some(&reader),
        &[
            ("action", "cancel_all"),
            ("state", "delayed"),
            ("csrf", &csrf_in(&page)),
        ],
    )
    .await;
    assert_eq!(forged.status(), StatusCode::FORBIDDEN);
    assert_eq!(s.get("/v1/queues/billing").await.1["delayed"], 4);

    // An admin: the search's confirmation names what goes, then only those go.
    let admin = session_cookie(&s, ADMIN).await;
    let page = page_as(&http, &s, &admin, "/ui/queues/billing?state=delayed").await;
    assert!(page.contains("Cancel all 4 delayed"), "{page}");
    let csrf = csrf_in(&page);
    let asked = page_as(
        &http,
        &s,
        &admin,
        "/ui/queues/billing/confirm?action=cancel_all&state=delayed&contains=%22customer%22%3A42",
    )
    .await;
    assert!(asked.contains("whose payload or id contains"), "{asked}");
    let done = post_form(
        &http,
        &act,
        Some(&admin),
        &[
            ("action", "cancel_all"),
            ("state", "delayed"),
            ("contains", "\"customer\":42"),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(done.status(), StatusCode::SEE_OTHER);
    let to = done.headers()["location"]
        .to_str()
        .expect("location")
        .to_owned();
    assert!(to.contains("Cancelled%202%20messages"), "{to}");
    for (id, status) in [("b1", 404), ("b3", 404), ("b2", 200), ("b4", 200)] {
        let got = s.get(&format!("/v1/queues/billing/messages/{id}")).await;
        assert_eq!(got.0.as_u16(), status, "{id}: {}", got.1);
    }

    // A whole state; dead letters and made-up states are not a bulk cancel's.
    for bad in ["dead", "in_flight", "everything"] {
        let refused = post_form(
            &http,
            &act,
            Some(&admin),
            &[("action", "cancel_all"), ("state", bad), ("csrf", &csrf)],
        )
        .await;
        assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
    let all = post_form(
        &http,
        &act,
        Some(&admin),
        &[
            ("action", "cancel_all"),
            ("state", "delayed"),
            ("csrf", &csrf),
        ],
    )
    .await;
    assert_eq!(all.status(), StatusCode::SEE_OTHER);
    let stats = s.get("/v1/queues/billing").await.1;
    assert_eq!(
        (&stats["delayed"], &stats["ready"]),
        (&json!(0), &json!(1)),
        "{stats}"
    );
}

#[tokio::test]
async fn a_search_offers_to_cancel_what_it_found_in_a_browser() {
    let s = billing().await;
    let browser = Browser::start().await;
    crate::ui::login(&browser, &s.base, ADMIN).await;
    browser.wait_for("#queues", WAIT).await;
    browser
        .goto(&format!("{}/ui/queues/billing?state=delayed", s.base))
        .await;
    browser.wait_for("#search", WAIT).await;
    browser
        .fill("#search input[name=contains]", "\"customer\":42")
        .await;
    browser.click("#search button[type=submit]").await;
    browser
        .wait_for_text("#search-progress", "(done)", WAIT)
        .await;
    browser.wait_for("#cancel-found:not([hidden])", WAIT).await;
    browser.click("#cancel-found button").await;
    let asked = browser
        .wait_for_text("#confirm-text", "whose payload or id contains", WAIT)
        .await;
    assert!(asked.contains("\"customer\":42"), "{asked}");
    browser.click("#confirm").await;
    browser
        .wait_for_text("[role=status]", "Cancelled 2 messages.", WAIT)
        .await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await;
    assert_eq!(s.get("/v1/queues/billing").await.1["delayed"], 2);
}
