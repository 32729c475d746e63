//! The dashboard's schedules table in a real headless Chromium: each schedule shows its
//! expression as written, its time zone and its next ticks, the same as the API answers (it
//! showed about 17 KB of the parsed pattern's `Debug` text per schedule).

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::browser::Browser;
use crate::common::*;

const ADMIN: &str = "admin-token-0123456789";
const WAIT: Duration = Duration::from_secs(10);

/// A tick as the dashboard writes it: `2030-01-01 02:30:00 UTC`.
fn shown(ms: &Value) -> String {
    let t = std::time::UNIX_EPOCH + Duration::from_millis(ms.as_u64().expect("ms"));
    humantime::format_rfc3339_seconds(t)
        .to_string()
        .replace('T', " ")
        .replace('Z', " UTC")
}

#[tokio::test]
async fn the_schedules_table_shows_each_expression_its_time_zone_and_next_ticks() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let nightly = json!({ "cron": "30 2 * * *", "time_zone": "Europe/Berlin", "payload": "night" });
    let (status, nightly) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/nightly",
            Some(nightly),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{nightly}");
    let pulse = json!({ "every": "30s", "payload": "pulse" });
    let (status, _) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/pulse",
            Some(pulse),
        )
        .await;
    assert_eq!(status, StatusCode::OK);

    let browser = Browser::start().await;
    crate::ui::login(&browser, &s.base, ADMIN).await;
    browser.wait_for("#queues", WAIT).await;
    browser.goto(&format!("{}/ui/queues/reports", s.base)).await;
    browser.wait_for("tr[data-schedule=nightly]", WAIT).await;

    let cell = |css: &'static str| browser.text(css);
    assert_eq!(
        cell("tr[data-schedule=nightly] td.when").await,
        "30 2 * * *"
    );
    assert_eq!(
        cell("tr[data-schedule=nightly] td.tz").await,
        "Europe/Berlin"
    );
    let row = cell("tr[data-schedule=nightly]").await;
    let ticks = nightly["next_ticks_ms"].as_array().expect("next ticks");
    for tick in &ticks[..3] {
        assert!(row.contains(&shown(tick)), "{} not in {row:?}", shown(tick));
    }
    assert_eq!(cell("tr[data-schedule=pulse] td.when").await, "every 30s");
    assert_eq!(cell("tr[data-schedule=pulse] td.tz").await, "–");

    let html = browser
        .execute("return document.documentElement.outerHTML;", vec![])
        .await;
    let html = html.as_str().expect("the page's HTML");
    assert!(
        !html.contains("Recurrence") && html.len() < 64 * 1024,
        "the parsed schedule leaks into the page ({} bytes)",
        html.len()
    );
    browser
        .execute(
            "document.querySelector('tr[data-schedule=nightly]').scrollIntoView();",
            vec![],
        )
        .await;
    browser.screenshot("schedules").await;
    let errors = browser.console_errors().await;
    assert!(errors.is_empty(), "console errors: {errors:?}");
    browser.close().await;
}
