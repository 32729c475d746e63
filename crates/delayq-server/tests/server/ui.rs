//! The dashboard in a real headless Chromium, against the real server over HTTP: log in, the
//! overview's numbers against the API's, requeue a dead letter and see it delivered, cancel
//! a delayed message, pause and resume, read-only roles, phone width, no console errors; and
//! over plain HTTP: wrong tokens, missing CSRF tokens and read-only sessions are refused.
//! Screenshots of each page go to `target/ui-screenshots/`.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::ui::segment;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::common::*;

const ADMIN: &str = "admin-token-0123456789";
const SEND: &str = "send-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

async fn secured() -> TestServer {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}\nsend:{SEND}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    s
}

/// Queue `orders`: three delayed, two ready, and one dead letter (`order-dead`).
async fn fill(s: &TestServer) {
    for i in 1..=3 {
        let sent = s
            .post(
                "/v1/queues/orders/messages",
                json!({ "payload": { "order": i }, "delay": format!("{i}h"), "id": format!("order-{i}") }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED, "{}", sent.1);
    }
    let sent = s
        .post(
            "/v1/queues/orders/messages",
            json!({ "payload": { "order": 9, "note": "card declined" }, "id": "order-dead", "max_attempts": 1 }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED);
    let got = receive(s, "orders", 1, "5s").await;
    assert_eq!(got[0]["id"], "order-dead");
    let nacked = s
        .post(
            "/v1/queues/orders/nack",
            json!({ "receipt": got[0]["receipt"], "error": "HTTP 500: payment service down" }),
        )
        .await;
    assert_eq!(nacked.1["outcome"], "dead");
    for i in 4..=5 {
        let sent = s
            .post(
                "/v1/queues/orders/messages",
                json!({ "payload": { "order": i }, "id": format!("order-{i}") }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED);
    }
}

pub(crate) async fn login(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/ui/login")).await;
    browser.fill("#token", token).await;
    browser.click("button[type=submit]").await;
}

async fn stats(s: &TestServer) -> Value {
    let (status, stats) = s.get("/v1/queues/orders").await;
    assert_eq!(status, StatusCode::OK);
    stats
}

#[tokio::test]
async fn the_dashboard_shows_the_queues_and_acts_on_them_in_a_real_browser() {
    let s = secured().await;
    fill(&s).await;
    let browser = Browser::start().await;

    // A wrong token does not log in.
    login(&browser, &s.base, "not-a-token-0123456789").await;
    browser
        .wait_for_text("[role=alert]", "not a token", WAIT)
        .await;
    assert!(
        browser.cookies().await.is_empty(),
        "a wrong token got a cookie"
    );
    browser.screenshot("login-refused").await;
    // Chromium logs the refusal's 401 as a failed load, maybe a moment later: that one is
    // expected, nothing else. Logging in again waits long enough for it to be logged.

    // The admin token does, with an HttpOnly, SameSite=Strict cookie.
    login(&browser, &s.base, ADMIN).await;
    browser.wait_for("#queues", WAIT).await;
    let errors = browser.console_errors().await;
    assert!(
        errors
            .iter()
            .all(|e| e.contains("/ui/login") && e.contains("401")),
        "console errors: {errors:?}"
    );
    let cookies = browser.cookies().await;
    let session = cookies
        .iter()
        .find(|c| c.name() == "delayq_session")
        .expect("the session cookie");
    assert_eq!(session.http_only(), Some(true));
    assert!(session.to_string().contains("SameSite=Strict"), "{session}");

    // The overview's numbers are the API's.
    let api = stats(&s).await;
    for state in ["delayed", "ready", "in_flight", "dead"] {
        let shown = browser
            .text(&format!("tr[data-queue=orders] td[data-state={state}]"))
            .await;
        assert_eq!(shown, api[state].to_string(), "{state}");
    }
    assert_eq!(api["dead"], 1);
    // It names the server the queues are on, as /readyz does.
    let (_, ready) = s.get("/readyz").await;
    let server = ready["server"]["version"]
        .as_str()
        .expect("version")
        .to_owned();
    let footnote = browser.text("#footnote").await;
    assert!(
        footnote.contains(&server),
        "{footnote} does not name {ready}"
    );
    browser.screenshot("overview").await;

    // The dead letter: its page shows the error; Requeue makes it ready, and a consumer gets it.
    browser.click("tr[data-queue=orders] a").await;
    browser.wait_for("#messages", WAIT).await;
    browser
        .goto(&format!("{}/ui/queues/orders?state=dead", s.base))
        .await;
    browser.click("tr[data-id=order-dead] a").await;
    browser
        .wait_for_text("#errors", "payment service down", WAIT)
        .await;
    assert!(browser
        .text("#payload")
        .await
        .contains("\"note\": \"card declined\""));
    browser.screenshot("message").await;
    browser.click("#requeue").await;
    browser
        .wait_for_text("[role=status]", "Requeued", WAIT)
        .await;
    assert_eq!(browser.text("#state").await, "ready");
    let got = receive(&s, "orders", 10, "5s").await;
    assert!(
        got.iter().any(|d| d["id"] == "order-dead"),
        "the requeued message was not delivered: {got:?}"
    );

    // Cancel a delayed message from its page.
    browser
        .goto(&format!("{}/ui/queues/orders/messages/order-2", s.base))
        .await;
    browser.click("#cancel").await;
    browser
        .wait_for_text("[role=status]", "order-2", WAIT)
        .await;
    assert_eq!(
        s.get("/v1/queues/orders/messages/order-2").await.0,
        StatusCode::NOT_FOUND
    );

    // Pause and resume.
    browser.goto(&format!("{}/ui/queues/orders", s.base)).await;
    browser.click("#pause").await;
    browser.wait_for("#resume", WAIT).await;
    assert_eq!(stats(&s).await["paused"], true);
    browser.screenshot("queue").await;
    browser.click("#resume").await;
    browser.wait_for("#pause", WAIT).await;
    assert_eq!(stats(&s).await["paused"], false);

    // A search steps through the delayed messages and finds one by its id, to the end.
    browser
        .goto(&format!("{}/ui/queues/orders?state=delayed", s.base))
        .await;
    browser
        .fill("#search input[name=contains]", "order-3")
        .await;
    browser.click("#search button[type=submit]").await;
    browser
        .wait_for_text("#search-progress", "(done)", WAIT)
        .await;
    assert!(browser.text("#search-results").await.contains("order-3"));
    assert!(!browser.text("#search-results").await.contains("order-1"));
    assert!(browser
        .text("#search-progress")
        .await
        .starts_with("1 found"));

    // Requeue all dead letters: a confirmation names the count first.
    for id in ["bulk-1", "bulk-2"] {
        let sent = s
            .post(
                "/v1/queues/orders/messages",
                json!({ "payload": 1, "id": id, "max_attempts": 1 }),
            )
            .await;
        assert_eq!(sent.0, StatusCode::CREATED);
    }
    for d in receive(&s, "orders", 2, "5s").await {
        let nacked = s
            .post(
                "/v1/queues/orders/nack",
                json!({ "receipt": d["receipt"], "error": "bulk" }),
            )
            .await;
        assert_eq!(nacked.1["outcome"], "dead", "{d}");
    }
    browser
        .goto(&format!("{}/ui/queues/orders?state=dead", s.base))
        .await;
    browser.click("#requeue-all").await;
    browser
        .wait_for_text("#confirm-text", "Requeue all 2 dead letters", WAIT)
        .await;
    browser.click("#confirm").await;
    browser
        .wait_for_text("[role=status]", "Requeued 2 dead letters", WAIT)
        .await;
    assert_eq!(stats(&s).await["dead"], 0);

    // At phone width nothing sticks out sideways: wide tables scroll inside their box.
    browser.set_window_width(390).await;
    for page in ["/ui", "/ui/queues/orders?state=delayed"] {
        browser.goto(&format!("{}{page}", s.base)).await;
        let fits = browser
            .execute(
                "return document.documentElement.scrollWidth <= window.innerWidth;",
                vec![],
            )
            .await;
        assert_eq!(fits, json!(true), "{page} is wider than a phone");
    }
    browser.screenshot("queue-phone").await;

    // The page refreshes itself in place: a message sent meanwhile shows up in the counts
    // without a reload, and the scroll position stays where it was.
    let delayed_before = stats(&s).await["delayed"].as_u64().expect("count");
    browser.execute("window.scrollTo(0, 400);", vec![]).await;
    let sent = s
        .post(
            "/v1/queues/orders/messages",
            json!({ "payload": 1, "delay": "1h" }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED);
    browser
        .wait_for_text(
            "[data-count=delayed] .n",
            &(delayed_before + 1).to_string(),
            Duration::from_secs(15),
        )
        .await;
    let scrolled = browser.execute("return window.scrollY;", vec![]).await;
    assert_eq!(scrolled, json!(400), "the refresh moved the page");

    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");

    // A send token sees the pages, read-only: no buttons that act.
    browser.set_window_width(1280).await;
    browser.click("#logout").await;
    browser.wait_for("#token", WAIT).await;
    login(&browser, &s.base, SEND).await;
    browser.wait_for_text("header", "read-only", WAIT).await;
    browser.goto(&format!("{}/ui/queues/orders", s.base)).await;
    browser.wait_for("#messages", WAIT).await;
    let buttons = browser
        .execute(
            "return document.querySelectorAll('#pause, #resume').length;",
            vec![],
        )
        .await;
    assert_eq!(buttons, json!(0));
    browser.close().await;
}

/// `pairs` as an HTML form sends them.
fn form_body(pairs: &[(&str, &str)]) -> String {
    // Percent-encoding every byte but the unreserved ones is valid form encoding too.
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", segment(k), segment(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// A session cookie for `token`, through the login form over plain HTTP.
/// A client for the dashboard's forms: it does not follow redirects, so a test sees the
/// 303 that answers a form.
pub fn form_client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

pub async fn session_cookie(s: &TestServer, token: &str) -> String {
    let http = form_client();
    let login = format!("{}/ui/login", s.base);
    let resp = post_form(&http, &login, None, &[("token", token)]).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let set = resp
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .expect("a cookie")
        .to_owned();
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict"),
        "{set}"
    );
    set.split(';').next().expect("name=value").to_owned()
}

/// The CSRF token in the queue page that `cookie`'s session sees.
async fn page_csrf(http: &reqwest::Client, s: &TestServer, cookie: &str) -> String {
    csrf_in(&page_as(http, s, cookie, "/ui/queues/orders").await)
}

/// The dashboard page at `path`, as `cookie`'s session sees it.
pub async fn page_as(http: &reqwest::Client, s: &TestServer, cookie: &str, path: &str) -> String {
    http.get(format!("{}{path}", s.base))
        .header("cookie", cookie)
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("html")
}

/// The CSRF token in a page's forms.
pub fn csrf_in(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF token in the page")
        .to_owned()
}

/// POSTs `form` to `url` as a browser would, with `cookie` if any; the status.
pub async fn post_form(
    http: &reqwest::Client,
    url: &str,
    cookie: Option<&str>,
    form: &[(&str, &str)],
) -> reqwest::Response {
    let mut req = http
        .post(url)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(form));
    if let Some(c) = cookie {
        req = req.header("cookie", c);
    }
    req.send().await.expect("post")
}

#[tokio::test]
async fn actions_need_an_admin_session_and_its_csrf_token() {
    let s = secured().await;
    fill(&s).await;
    let http = form_client();
    // No session: pages send to the login form; a wrong token gets no cookie.
    let page = http
        .get(format!("{}/ui", s.base))
        .send()
        .await
        .expect("get");
    assert_eq!(page.status(), StatusCode::SEE_OTHER);
    assert_eq!(page.headers()["location"], "/ui/login");
    let login = format!("{}/ui/login", s.base);
    let wrong = post_form(&http, &login, None, &[("token", "not-a-token-0123456789")]).await;
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    assert!(wrong.headers().get("set-cookie").is_none());

    let act = format!("{}/ui/queues/orders/act", s.base);
    let admin = session_cookie(&s, ADMIN).await;
    let csrf = page_csrf(&http, &s, &admin).await;
    // A send token's session, even with its own CSRF token, cannot act.
    let sender = session_cookie(&s, SEND).await;
    let sender_csrf = page_csrf(&http, &s, &sender).await;
    for (cookie, form) in [
        (None, vec![("action", "pause"), ("csrf", csrf.as_str())]),
        (Some(&admin), vec![("action", "pause")]),
        (Some(&admin), vec![("action", "pause"), ("csrf", "0000")]),
        (
            Some(&admin),
            vec![("action", "pause"), ("csrf", sender_csrf.as_str())],
        ),
        (
            Some(&sender),
            vec![("action", "pause"), ("csrf", sender_csrf.as_str())],
        ),
    ] {
        let resp = post_form(&http, &act, cookie.map(String::as_str), &form).await;
        assert!(
            matches!(
                resp.status(),
                StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED
            ),
            "{cookie:?} {form:?}: {}",
            resp.status()
        );
    }
    assert_eq!(stats(&s).await["paused"], false, "a refused action acted");
    // With the admin session's own token it acts.
    let resp = post_form(
        &http,
        &act,
        Some(&admin),
        &[("action", "pause"), ("csrf", &csrf)],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    assert_eq!(stats(&s).await["paused"], true);
}
