//! A schedule's jitter and overlap over HTTP and the CLI: set on PUT, shown on GET, applied
//! by the server's scheduler, and bad values refused with 400 and nothing written.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::cli::{fails, json as cli_json};
use crate::common::*;

#[tokio::test]
async fn a_jittered_schedule_without_overlap_is_put_shown_and_fired() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/hourly",
            Some(json!({ "every": "1s", "payload": 1, "jitter": "300ms", "overlap": "skip" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(
        (&created["jitter_ms"], &created["overlap"]),
        (&json!(300), &json!("skip"))
    );
    let got = receive(&s, "reports", 1, "5s").await;
    assert_eq!(got.len(), 1, "no tick delivered");
    let id = got[0]["id"].as_str().expect("id");
    let tick: u64 = id
        .rsplit(':')
        .next()
        .and_then(|t| t.parse().ok())
        .expect("tick");
    let offset = delayq::tick_jitter("hourly", tick, std::time::Duration::from_millis(300));
    assert_eq!(
        got[0]["due_ms"].as_u64(),
        Some(tick + offset.as_millis() as u64)
    );

    for bad in [
        json!({ "every": "1s", "payload": 1, "jitter": "0s" }),
        json!({ "every": "1s", "payload": 1, "overlap": "queue" }),
    ] {
        let answer = s
            .call(
                Method::PUT,
                "/v1/queues/reports/schedules/bad",
                Some(bad.clone()),
            )
            .await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{bad}: {}", answer.1);
    }
    let (status, _) = s.get("/v1/queues/reports/schedules/bad").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "nothing written");
}

#[test]
fn the_cli_puts_a_schedule_with_a_jitter_and_no_overlap() {
    let redis = RedisServer::start();
    let put = cli_json(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "nightly",
            "x",
            "--every",
            "1h",
            "--jitter",
            "5m",
            "--overlap",
            "skip",
        ],
    );
    assert_eq!(
        (&put["jitter_ms"], &put["overlap"]),
        (&json!(300_000), &json!("skip"))
    );
    let refused = fails(
        &redis,
        &[
            "schedule",
            "put",
            "jobs",
            "bad",
            "x",
            "--every",
            "1h",
            "--overlap",
            "queue",
        ],
    );
    assert!(refused.contains("overlap"), "{refused}");
}

#[tokio::test]
async fn the_ticks_of_a_pause_are_backfilled_once_over_http() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/jobs/schedules/tick",
            Some(json!({ "every": "1s", "payload": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    let (status, _) = s
        .call(
            Method::PATCH,
            "/v1/queues/jobs/schedules/tick",
            Some(json!({ "paused": true })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // Paused, the schedule fires nothing for 2.2 s: those ticks are missed.
    tokio::time::sleep(std::time::Duration::from_millis(2_200)).await;
    let range = json!({ "from": created["created_ms"], "to": created["created_ms"].as_u64().map(|c| c + 2_100) });
    let (status, done) = s
        .post("/v1/queues/jobs/schedules/tick/backfill", range.clone())
        .await;
    assert_eq!(status, StatusCode::OK, "{done}");
    let sent = done["sent"].as_u64().expect("sent");
    assert!(sent >= 2, "{done}");
    let (_, again) = s
        .post("/v1/queues/jobs/schedules/tick/backfill", range)
        .await;
    assert_eq!(again, json!({ "sent": 0, "already_sent": sent }));
    let got = receive(&s, "jobs", 10, "0s").await;
    assert_eq!(got.len() as u64, sent, "each missed tick delivered once");

    let (status, _) = s
        .post(
            "/v1/queues/jobs/schedules/none/backfill",
            json!({ "from": 0, "to": 1 }),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let answer = s
        .post(
            "/v1/queues/jobs/schedules/tick/backfill",
            json!({ "from": 0, "to": "2999-01-01T00:00:00Z" }),
        )
        .await;
    assert_error(&answer, StatusCode::BAD_REQUEST, "invalid_schedule");
}

#[test]
fn the_cli_backfills_a_schedules_missed_ticks() {
    let redis = RedisServer::start();
    cli_json(
        &redis,
        &["schedule", "put", "jobs", "s", "x", "--every", "1s"],
    );
    // No scheduler runs here: every tick is missed.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let now = humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string();
    let args = [
        "schedule",
        "backfill",
        "jobs",
        "s",
        "--from",
        "2000-01-01T00:00:00Z",
        "--to",
        &now,
    ];
    let done = cli_json(&redis, &args);
    assert!(done["sent"].as_u64() >= Some(1), "{done}");
    let again = cli_json(&redis, &args);
    assert_eq!(again["sent"], 0, "{again}");
}

#[tokio::test]
async fn the_dashboard_backfills_a_schedule() {
    const ADMIN: &str = "admin-token-0123456789";
    let tokens = delayq_server::auth::Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(delayq_server::limits::Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/ui/schedules/tick",
            Some(json!({ "every": "1s", "payload": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    s.call(
        Method::PATCH,
        "/v1/queues/ui/schedules/tick",
        Some(json!({ "paused": true })),
    )
    .await;
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    let http = crate::ui::form_client();
    let admin = crate::ui::session_cookie(&s, ADMIN).await;
    let page = crate::ui::page_as(&http, &s, &admin, "/ui/queues/ui").await;
    assert!(page.contains("value=\"schedule_backfill\""), "{page}");
    let text = |ms: u64| {
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
        humantime::format_rfc3339_millis(t).to_string()
    };
    let from = created["created_ms"].as_u64().expect("created");
    let resp = crate::ui::post_form(
        &http,
        &format!("{}/ui/queues/ui/act", s.base),
        Some(&admin),
        &[
            ("action", "schedule_backfill"),
            ("csrf", &crate::ui::csrf_in(&page)),
            ("schedule", "tick"),
            ("at", &text(from)),
            ("until", &text(from + 1_100)),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let got = receive(&s, "ui", 10, "0s").await;
    assert!(!got.is_empty(), "a missed tick backfilled");
    s.shutdown().await;
}

#[tokio::test]
async fn a_jitter_past_the_max_delay_is_refused_and_a_refused_tick_is_skipped_not_spun_on() {
    let s = TestServer::start().await;
    let (status, body) = s
        .call(
            Method::PATCH,
            "/v1/queues/spin",
            Some(json!({ "max_delay": "1h" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = s
        .call(
            Method::PUT,
            "/v1/queues/spin/schedules/far",
            Some(json!({ "every": "1s", "payload": 1, "jitter": "2h" })),
        )
        .await;
    assert_error(&refused, StatusCode::BAD_REQUEST, "invalid_schedule");
    assert_eq!(
        s.get("/v1/queues/spin/schedules/far").await.0,
        StatusCode::NOT_FOUND
    );

    // Accepted under the max delay, then the max delay is lowered under it: most ticks are
    // now refused by the queue. Each is skipped, counted, and not tried again.
    let (status, body) = s
        .call(
            Method::PUT,
            "/v1/queues/spin/schedules/near",
            Some(json!({ "every": "1s", "payload": 1, "jitter": "50m" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = s
        .call(
            Method::PATCH,
            "/v1/queues/spin",
            Some(json!({ "max_delay": "1m" })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused_ticks = || async {
        let (_, metrics) = s.get_text("/metrics").await;
        metrics
            .lines()
            .find_map(|l| l.strip_prefix("delayq_schedule_ticks_refused_total{queue=\"spin\"} "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    wait_until(
        std::time::Duration::from_secs(20),
        "a refused tick to be counted",
        || async { refused_ticks().await >= 1.0 },
    )
    .await;
    // Over two seconds the scheduler sends about two ticks (one a second) and reads its
    // definitions twice: tens of script calls at most. Spinning on a refused tick it made
    // hundreds a second.
    s.redis.cli(&["CONFIG", "RESETSTAT"]);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    let calls = s.redis.script_calls();
    assert!(calls < 100, "{calls} script calls in 2 s");
}
