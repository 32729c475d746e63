//! The audit log (issue 54): every admin and destructive action, and every refused attempt
//! at one, recorded with its actor (a token's name, never its secret), through what, on which
//! queue and ids, from where, and its outcome; read by admins over HTTP (an admin of some
//! queues sees theirs only), by the CLI and on the dashboard; kept to a bounded length.

use delayq_server::auth::{hashed_line, Scope, Tokens};
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;
use crate::ui::{csrf_in, form_client, page_as, post_form, session_cookie};

const OPS: &str = "ops-admin-secret-0123456789";
const BILLING: &str = "billing-admin-secret-0123456789";
const SENDER: &str = "sender-secret-0123456789";

fn tokens() -> Tokens {
    let every = Scope::default();
    let billing = Scope::parse("billing.*").expect("scope");
    let text = [
        hashed_line("ops", "admin", &every, OPS).expect("line"),
        hashed_line("billing-ops", "admin", &billing, BILLING).expect("line"),
        hashed_line("orders-sender", "send", &every, SENDER).expect("line"),
    ]
    .join("\n");
    Tokens::parse(&text).expect("tokens")
}

async fn audited(limits: Limits) -> TestServer {
    TestServer::start_with(limits, tokens()).await
}

/// The log as `token` reads it (`query`: the query string).
async fn log(s: &mut TestServer, token: &str, query: &str) -> Vec<Value> {
    s.token = Some(token.into());
    let (status, page) = s.get(&format!("/v1/audit{query}")).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    page["entries"].as_array().cloned().unwrap_or_default()
}

/// The entry of `action` on `queue` by `actor`, if any.
fn find<'a>(entries: &'a [Value], actor: &str, action: &str, queue: &str) -> Option<&'a Value> {
    entries
        .iter()
        .find(|e| e["actor"] == actor && e["action"] == action && e["queue"] == queue)
}

#[tokio::test]
async fn admin_and_destructive_actions_are_recorded_with_who_did_them() {
    let mut s = audited(Limits::default()).await;
    s.token = Some(SENDER.into());
    for id in ["o-1", "o-2", "o-3"] {
        let body = json!({ "payload": 1, "id": id, "delay": "1h" });
        assert_eq!(
            s.post("/v1/queues/orders/messages", body).await.0,
            StatusCode::CREATED
        );
    }
    let one = s
        .call(Method::DELETE, "/v1/queues/orders/messages/o-1", None)
        .await;
    assert_eq!(one.0, StatusCode::OK, "{}", one.1);
    let many = s
        .post("/v1/queues/orders/cancel", json!({ "ids": ["o-2", "o-9"] }))
        .await;
    assert_eq!(many.0, StatusCode::OK);
    // Refused: a sender's purge (its role), and a pause with a token nobody knows.
    let purge = json!({ "all": true });
    assert_eq!(
        s.post("/v1/queues/orders/purge", purge.clone()).await.0,
        StatusCode::FORBIDDEN
    );
    s.token = Some("not-a-token-0123456789".into());
    assert_eq!(
        s.post("/v1/queues/orders/pause", json!({})).await.0,
        StatusCode::UNAUTHORIZED
    );

    s.token = Some(OPS.into());
    let settings = json!({ "idempotency_window": "1h" });
    let changes: [(Method, &str, Option<Value>); 7] = [
        (Method::PATCH, "/v1/queues/orders", Some(settings)),
        (Method::POST, "/v1/queues/orders/pause", None),
        (Method::POST, "/v1/queues/orders/resume", None),
        (Method::POST, "/v1/queues/orders/purge", Some(purge)),
        (
            Method::PUT,
            "/v1/queues/billing.eu",
            Some(json!({ "partitions": 2 })),
        ),
        (
            Method::PUT,
            "/v1/queues/billing.eu/schedules/nightly",
            Some(json!({ "every": "1h", "payload": 1 })),
        ),
        (
            Method::DELETE,
            "/v1/queues/billing.eu/schedules/nightly",
            None,
        ),
    ];
    for (method, path, body) in changes {
        let answer = s.call(method.clone(), path, body).await;
        assert!(answer.0.is_success(), "{method} {path}: {answer:?}");
    }

    let entries = log(&mut s, OPS, "?limit=100").await;
    let cancel = find(&entries, "orders-sender", "cancel", "orders").expect("the cancel");
    assert_eq!(cancel["ids"], json!(["o-1"]));
    assert_eq!(cancel["via"], "api");
    assert_eq!(cancel["outcome"], "ok");
    assert_eq!(cancel["from"], "127.0.0.1");
    let many = find(&entries, "orders-sender", "cancel_many", "orders").expect("cancel many");
    assert_eq!(many["ids"], json!(["o-2"]), "the ids it cancelled");
    let refused = find(&entries, "orders-sender", "purge", "orders").expect("the refused purge");
    assert_eq!(
        (refused["outcome"].as_str(), refused["status"].as_u64()),
        (Some("refused"), Some(403))
    );
    let unknown = find(&entries, "(unknown token)", "pause", "orders").expect("401");
    assert_eq!(unknown["outcome"], "refused");
    for (action, queue) in [
        ("configure", "orders"),
        ("pause", "orders"),
        ("resume", "orders"),
        ("purge", "orders"),
        ("create_queue", "billing.eu"),
        ("schedule_put", "billing.eu"),
        ("schedule_delete", "billing.eu"),
    ] {
        let e =
            find(&entries, "ops", action, queue).unwrap_or_else(|| panic!("{action}: {entries:?}"));
        assert_eq!(e["outcome"], "ok", "{e}");
    }
    let put = find(&entries, "ops", "schedule_put", "billing.eu").expect("put");
    assert_eq!(put["ids"], json!(["nightly"]));
    assert!(
        !entries.iter().any(|e| e.to_string().contains("secret")),
        "no secret in the log"
    );
    // Newest first.
    assert_eq!(entries[0]["action"], "schedule_delete");

    // An admin of billing.* reads billing.*'s entries only, and may not ask for another's.
    let theirs = log(&mut s, BILLING, "").await;
    assert!(!theirs.is_empty());
    assert!(
        theirs.iter().all(|e| e["queue"] == "billing.eu"),
        "{theirs:?}"
    );
    assert_error(
        &s.get("/v1/audit?queue=orders").await,
        StatusCode::FORBIDDEN,
        "out_of_scope",
    );
    // Reading the log is an admin's.
    s.token = Some(SENDER.into());
    assert_error(
        &s.get("/v1/audit").await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    // Pages: two entries, then the next two from `next`.
    s.token = Some(OPS.into());
    let (_, first) = s.get("/v1/audit?limit=2").await;
    let next = first["next"].as_str().expect("a next page");
    let (_, second) = s.get(&format!("/v1/audit?limit=2&before={next}")).await;
    assert_eq!(second["entries"][0]["id"], entries[2]["id"]);
}

#[tokio::test]
async fn the_dashboards_actions_are_recorded_as_its_sessions_token() {
    let mut s = audited(Limits::default()).await;
    s.token = Some(OPS.into());
    s.post("/v1/queues/orders/messages", json!({ "payload": 1 }))
        .await;
    let cookie = session_cookie(&s, OPS).await;
    let http = form_client();
    let csrf = csrf_in(&page_as(&http, &s, &cookie, "/ui/queues/orders").await);
    let url = format!("{}/ui/queues/orders/act", s.base);
    let form = [("csrf", csrf.as_str()), ("action", "pause")];
    let resp = post_form(&http, &url, Some(&cookie), &form).await;
    assert_eq!(resp.status(), StatusCode::SEE_OTHER);
    let entries = log(&mut s, OPS, "").await;
    let e = find(&entries, "ops", "dashboard:pause", "orders").expect("the dashboard's pause");
    assert_eq!(e["via"], "dashboard");
    assert_eq!(e["outcome"], "ok");
    // The audit page lists it.
    let page = page_as(&http, &s, &cookie, "/ui/audit").await;
    assert!(page.contains("dashboard:pause"), "{page}");
}

#[tokio::test]
async fn the_log_keeps_about_the_newest_entries_only() {
    let limits = Limits {
        audit_max_entries: 10,
        ..Limits::default()
    };
    let mut s = audited(limits).await;
    s.token = Some(OPS.into());
    for _ in 0..150 {
        s.post("/v1/queues/orders/pause", json!({})).await;
        s.post("/v1/queues/orders/resume", json!({})).await;
    }
    let kept: usize = s
        .redis
        .cli(&["XLEN", "dq:audit"])
        .trim()
        .parse()
        .expect("a length");
    // `MAXLEN ~` trims whole nodes of the stream (100 entries each): about the newest 10.
    assert!(kept <= 10 + 100, "{kept} of 300 kept");
    assert_eq!(log(&mut s, OPS, "?limit=1").await[0]["action"], "resume");
}

#[tokio::test]
async fn the_cli_reads_the_log_and_what_it_does_is_in_it() {
    let mut s = audited(Limits::default()).await;
    s.token = Some(OPS.into());
    s.post("/v1/queues/orders/pause", json!({})).await;
    let delayq = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_delayq"))
            .args(args)
            .env("DELAYQ_REDIS_URL", s.redis.url())
            .output()
            .expect("run delayq")
    };
    let resumed = delayq(&["resume", "orders"]);
    assert!(
        resumed.status.success(),
        "{}",
        String::from_utf8_lossy(&resumed.stderr)
    );
    let out = delayq(&["audit", "--queue", "orders"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = table.lines().collect();
    assert!(lines[0].starts_with("WHEN"), "{table}");
    assert!(
        lines[1].contains("(local cli)") && lines[1].contains("resume"),
        "{table}"
    );
    assert!(
        lines[2].contains("ops") && lines[2].contains("pause"),
        "{table}"
    );
}

/// A refused request costs the log a bounded entry, whatever it sends: an anonymous client
/// with a path of 10 KiB (a queue name and an id, neither valid) and a long forwarded-for
/// cannot make the log grow by more than a few hundred bytes a request.
#[tokio::test]
async fn a_refused_requests_entry_is_bounded_whatever_it_sends() {
    let mut s = audited(Limits::default()).await;
    let long = "x".repeat(5000);
    let answer = s
        .http
        .delete(format!("{}/v1/queues/{long}/messages/{long}", s.base))
        .header("x-forwarded-for", "y".repeat(5000))
        .send()
        .await
        .expect("request");
    assert_eq!(answer.status(), StatusCode::UNAUTHORIZED);
    let entries = log(&mut s, OPS, "").await;
    let e = entries
        .iter()
        .find(|e| e["actor"] == "(no token)" && e["action"] == "cancel")
        .expect("the refused cancel");
    let size = e.to_string().len();
    assert!(size < 1024, "an entry of {size} bytes: {e}");
    assert!(e["queue"]
        .as_str()
        .is_some_and(|q| q.starts_with("xxx") && q.len() <= 70));
}
