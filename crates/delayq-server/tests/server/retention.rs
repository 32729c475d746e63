//! Completed retention over HTTP, the CLI and the dashboard: `retain_completed` on a queue,
//! a gone message answered as "completed" with its outcome and times, the list of completed
//! messages, bad values refused with 400 and nothing changed.

use reqwest::{Method, StatusCode};
use serde_json::json;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;

use crate::cli::json as cli_json;
use crate::common::*;
use crate::ui::{csrf_in, page_as, post_form, session_cookie};

const ADMIN: &str = "admin-token-0123456789";

async fn retain(
    s: &TestServer,
    queue: &str,
    setting: serde_json::Value,
) -> (StatusCode, serde_json::Value) {
    s.call(
        Method::PATCH,
        &format!("/v1/queues/{queue}"),
        Some(json!({ "retain_completed": setting })),
    )
    .await
}

#[tokio::test]
async fn a_message_gone_is_answered_as_completed_with_its_outcome() {
    let s = TestServer::start().await;
    let (status, stats) = retain(&s, "orders", json!({ "keep_for": "7d", "max": 1000 })).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert_eq!(
        stats["retain_completed"],
        json!({ "keep_for_ms": 604_800_000u64, "max": 1000 })
    );
    let (status, _) = s
        .post(
            "/v1/queues/orders/messages",
            json!({ "payload": 1, "id": "close-1" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let got = receive(&s, "orders", 1, "0s").await;
    let (status, _) = s
        .post(
            "/v1/queues/orders/ack",
            json!({ "receipt": got[0]["receipt"] }),
        )
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let (status, m) = s.get("/v1/queues/orders/messages/close-1").await;
    assert_eq!(status, StatusCode::OK, "{m}");
    assert_eq!(
        (&m["state"], &m["outcome"]),
        (&json!("completed"), &json!("acked"))
    );
    // A final record keeps no payload, and says so rather than showing an empty one.
    assert!(
        m.get("payload").is_none() && m.get("payload_base64").is_none(),
        "{m}"
    );
    assert_eq!(m["payload_kept"], false, "{m}");
    let sent = m["sent_at_ms"].as_u64().expect("sent");
    let first = m["first_delivered_at_ms"].as_u64().expect("delivered");
    let finished = m["finished_at_ms"].as_u64().expect("finished");
    assert!(sent <= first && first <= finished, "{m}");

    let (status, list) = s.get("/v1/queues/orders/messages?state=completed").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list["messages"][0]["id"], "close-1");
    assert_eq!(list["messages"][0]["outcome"], "acked");
    let (_, stats) = s.get("/v1/queues/orders").await;
    assert_eq!(stats["completed"], 1);

    let (status, stats) = retain(&s, "orders", json!(null)).await;
    assert_eq!(status, StatusCode::OK, "{stats}");
    assert!(stats["retain_completed"].is_null());
    let (status, _) = s.get("/v1/queues/orders/messages/close-1").await;
    assert_eq!(status, StatusCode::NOT_FOUND, "records dropped");
}

#[tokio::test]
async fn a_retention_out_of_bounds_is_refused_with_nothing_changed() {
    let s = TestServer::start().await;
    for bad in [
        json!({ "keep_for": "10ms", "max": 10 }),
        json!({ "keep_for": "1h", "max": 0 }),
        json!({ "keep_for": "1h" }),
        json!({ "keep_for": "soon", "max": 10 }),
    ] {
        let answer = retain(&s, "bad", bad.clone()).await;
        assert_eq!(answer.0, StatusCode::BAD_REQUEST, "{bad}: {}", answer.1);
    }
    let (_, stats) = s.get("/v1/queues/bad").await;
    assert!(stats["retain_completed"].is_null(), "{stats}");
}

#[tokio::test]
async fn the_dashboard_sets_retention_and_lists_completed_messages() {
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let http = crate::ui::form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let page = page_as(&http, &s, &admin, "/ui/queues/ui").await;
    let resp = post_form(
        &http,
        &format!("{}/ui/queues/ui/act", s.base),
        Some(&admin),
        &[
            ("action", "retention"),
            ("csrf", &csrf_in(&page)),
            ("keep_for", "1d"),
            ("limit", "500"),
        ],
    )
    .await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let (_, stats) = s.get("/v1/queues/ui").await;
    assert_eq!(stats["retain_completed"]["max"], 500, "{stats}");

    s.post(
        "/v1/queues/ui/messages",
        json!({ "payload": 1, "id": "m1", "delay": "1h" }),
    )
    .await;
    let (status, _) = s
        .call(Method::DELETE, "/v1/queues/ui/messages/m1", None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let list = page_as(&http, &s, &admin, "/ui/queues/ui?state=completed").await;
    assert!(list.contains("data-id=\"m1\""), "{list}");
    assert!(list.contains("cancelled"), "{list}");
    let message = page_as(&http, &s, &admin, "/ui/queues/ui/messages/m1").await;
    assert!(message.contains("id=\"outcome\""), "{message}");
    s.shutdown().await;
}

#[test]
fn the_cli_sets_retention_and_gets_a_completed_message() {
    let redis = RedisServer::start();
    let set = cli_json(
        &redis,
        &[
            "configure",
            "jobs",
            "--retain-completed",
            "1h",
            "--retain-max",
            "50",
        ],
    );
    assert_eq!(set["retain_completed"]["max"], 50, "{set}");
    cli_json(
        &redis,
        &["send", "jobs", "x", "--id", "j1", "--delay", "1h"],
    );
    crate::cli::ok(&redis, &["cancel", "jobs", "j1"]);
    let got = cli_json(&redis, &["get", "jobs", "j1"]);
    assert_eq!(
        (&got["state"], &got["outcome"]),
        (&json!("completed"), &json!("cancelled"))
    );
    let off = cli_json(&redis, &["configure", "jobs", "--no-retain-completed"]);
    assert!(off["retain_completed"].is_null(), "{off}");
}
