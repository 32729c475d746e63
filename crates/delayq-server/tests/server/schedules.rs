//! Recurring schedules over HTTP: created, listed with their next run times, fired by the
//! server's own scheduler, and deleted; and bad definitions refused with a clear error.

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

#[tokio::test]
async fn a_schedule_put_over_http_fires_and_can_be_listed_and_deleted() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/every-second",
            Some(json!({ "cron": "* * * * * *", "payload": { "report": "daily" }, "priority": 7 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(
        (
            &created["cron"],
            &created["time_zone"],
            &created["missed"],
            &created["priority"]
        ),
        (
            &json!("* * * * * *"),
            &json!("UTC"),
            &json!("skip"),
            &json!(7)
        )
    );
    let next: Vec<u64> = serde_json::from_value(created["next_ticks_ms"].clone()).expect("ticks");
    assert_eq!(next.len(), 5);
    assert!(next.windows(2).all(|w| w[1] - w[0] == 1000), "{next:?}");

    // The server's scheduler sends the ticks: one arrives within a few seconds.
    let got = receive(&s, "reports", 1, "5s").await;
    assert_eq!(got.len(), 1, "no tick delivered");
    let id = got[0]["id"].as_str().expect("id");
    assert!(id.starts_with("sched:every-second:"), "{id}");
    assert_eq!(got[0]["payload"], json!({ "report": "daily" }));
    assert_eq!(got[0]["priority"], 7);
    let tick: u64 = id
        .rsplit(':')
        .next()
        .and_then(|t| t.parse().ok())
        .expect("tick");
    assert_eq!(got[0]["due_ms"], tick);

    let (status, list) = s.get("/v1/queues/reports/schedules").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["schedules"][0]["name"], "every-second");
    assert!(
        list["schedules"][0]["last_tick_ms"].as_u64() >= Some(tick),
        "{list}"
    );

    let (status, body) = s
        .call(
            Method::DELETE,
            "/v1/queues/reports/schedules/every-second",
            None,
        )
        .await;
    assert_eq!((status, &body["deleted"]), (StatusCode::OK, &json!(true)));
    let again = s
        .call(
            Method::DELETE,
            "/v1/queues/reports/schedules/every-second",
            None,
        )
        .await;
    assert_error(&again, StatusCode::NOT_FOUND, "not_found");
    let gone = s.get("/v1/queues/reports/schedules/every-second").await;
    assert_error(&gone, StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn a_berlin_morning_schedule_lists_its_runs_in_utc_across_daylight_saving() {
    let s = TestServer::start().await;
    let (status, created) = s
        .call(
            Method::PUT,
            "/v1/queues/mornings/schedules/nine",
            Some(json!({
                "cron": "0 0 9 * * *", "time_zone": "Europe/Berlin",
                "payload_base64": "aGk=", "missed": "once", "max_attempts": 3
            })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{created}");
    assert_eq!(
        (&created["missed"], &created["max_attempts"]),
        (&json!("once"), &json!(3))
    );
    assert_eq!(created["payload_base64"], "aGk=");
    for t in created["next_ticks_ms"].as_array().expect("ticks") {
        let t = t.as_u64().expect("ms");
        // 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer.
        assert!(
            t % 3_600_000 == 0 && [7, 8].contains(&(t / 3_600_000 % 24)),
            "{created}"
        );
    }
}

#[tokio::test]
async fn bad_schedules_are_refused_with_a_clear_error() {
    let s = TestServer::start().await;
    let put = |name: &'static str, body: Value| {
        let s = &s;
        async move {
            s.call(
                Method::PUT,
                &format!("/v1/queues/q/schedules/{name}"),
                Some(body),
            )
            .await
        }
    };
    let cases = [
        ("ok", json!({ "payload": 1 }), "invalid_schedule"),
        (
            "ok",
            json!({ "cron": "* * * * * *", "every": "1m", "payload": 1 }),
            "invalid_schedule",
        ),
        (
            "ok",
            json!({ "every": "1m", "time_zone": "UTC", "payload": 1 }),
            "invalid_schedule",
        ),
        (
            "ok",
            json!({ "cron": "0 9 * *", "payload": 1 }),
            "invalid_schedule",
        ),
        (
            "ok",
            json!({ "cron": "0 0 9 * * *", "time_zone": "Mars/Olympus", "payload": 1 }),
            "invalid_schedule",
        ),
        (
            "ok",
            json!({ "every": "500ms", "payload": 1 }),
            "invalid_schedule",
        ),
        (
            "ok",
            json!({ "every": "1m", "missed": "sometimes", "payload": 1 }),
            "invalid_option",
        ),
        ("ok", json!({ "every": "1m" }), "invalid_payload"),
        (
            "ok",
            json!({ "every": "1m", "payload": 1, "priority": 10 }),
            "invalid_option",
        ),
        (
            "ok",
            json!({ "every": "1m", "payload": 1, "delay": "1s" }),
            "malformed_json",
        ),
        (
            "a:b",
            json!({ "every": "1m", "payload": 1 }),
            "invalid_option",
        ),
    ];
    for (name, body, code) in cases {
        let answer = put(name, body.clone()).await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{body}: {}", answer.1);
        assert_eq!(answer.1["error"]["code"], code, "{body}: {}", answer.1);
    }
    let (_, list) = s.get("/v1/queues/q/schedules").await;
    assert_eq!(
        list["schedules"],
        json!([]),
        "a refused schedule was stored"
    );
}

#[tokio::test]
async fn a_schedule_is_paused_and_resumed_over_http_and_on_the_dashboard() {
    let s = TestServer::start().await;
    let (status, _) = s
        .call(
            Method::PUT,
            "/v1/queues/reports/schedules/hourly",
            Some(json!({ "every": "1h", "payload": 1 })),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, paused) = s
        .call(
            Method::PATCH,
            "/v1/queues/reports/schedules/hourly",
            Some(json!({ "paused": true })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    assert_eq!(paused["paused"], true);
    let (_, listed) = s.get("/v1/queues/reports/schedules").await;
    assert_eq!(listed["schedules"][0]["paused"], true, "{listed}");

    let missing = s
        .call(
            Method::PATCH,
            "/v1/queues/reports/schedules/nope",
            Some(json!({ "paused": true })),
        )
        .await;
    assert_eq!(missing.0, StatusCode::NOT_FOUND, "{}", missing.1);
    let (_, all) = s.get("/v1/queues/reports/schedules").await;
    assert_eq!(
        all["schedules"].as_array().map(Vec::len),
        Some(1),
        "nothing made"
    );
    for bad in [
        json!({}),
        json!({ "paused": "yes" }),
        json!({ "paused": true, "x": 1 }),
    ] {
        let refused = s
            .call(
                Method::PATCH,
                "/v1/queues/reports/schedules/hourly",
                Some(bad),
            )
            .await;
        assert_eq!(refused.0, StatusCode::BAD_REQUEST, "{}", refused.1);
    }

    // The dashboard's button resumes it.
    let http = crate::ui::form_client();
    let page = http
        .get(format!("{}/ui/queues/reports", s.base))
        .send()
        .await
        .expect("page")
        .text()
        .await
        .expect("text");
    assert!(page.contains("schedule_resume"), "{page}");
    let resp = crate::ui::post_form(
        &http,
        &format!("{}/ui/queues/reports/act", s.base),
        None,
        &[
            ("action", "schedule_resume"),
            ("schedule", "hourly"),
            ("csrf", &crate::ui::csrf_in(&page)),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, resumed) = s.get("/v1/queues/reports/schedules/hourly").await;
    assert_eq!(resumed["paused"], false);
    s.shutdown().await;
}

/// Issue 50, item 10: a classic 5-field crontab line and croner's nicknames are taken
/// where a schedule is put, shown as written, and fire at second 0.
#[tokio::test]
async fn a_five_field_crontab_line_and_a_nickname_are_taken_as_written() {
    let s = TestServer::start().await;
    for (name, cron, every_ms) in [
        ("nightly", "30 2 * * *", 86_400_000),
        ("daily", "@daily", 86_400_000),
    ] {
        let (status, created) = s
            .call(
                Method::PUT,
                &format!("/v1/queues/crontab/schedules/{name}"),
                Some(json!({ "cron": cron, "time_zone": "UTC", "payload": 1 })),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{created}");
        assert_eq!(created["cron"], cron, "{created}");
        let ticks: Vec<u64> = created["next_ticks_ms"]
            .as_array()
            .expect("ticks")
            .iter()
            .filter_map(Value::as_u64)
            .collect();
        assert_eq!(ticks.len(), 5, "{created}");
        let at = if name == "nightly" { 9_000_000 } else { 0 };
        assert!(ticks.iter().all(|t| t % 86_400_000 == at), "{ticks:?}");
        assert!(
            ticks.windows(2).all(|w| w[1] - w[0] == every_ms),
            "{ticks:?}"
        );
    }
}
