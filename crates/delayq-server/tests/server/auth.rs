//! Tokens and roles: off by default; when configured every route but the probes needs a
//! bearer token whose role allows it.

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;

const SEND: &str = "send-token-0123456789";
const CONSUME: &str = "consume-token-0123456789";
const ADMIN: &str = "admin-token-0123456789";

async fn secured() -> TestServer {
    let tokens =
        Tokens::parse(&format!("send:{SEND}\nconsume:{CONSUME}\nadmin:{ADMIN}")).expect("tokens");
    TestServer::start_with(Limits::default(), tokens).await
}

#[tokio::test]
async fn without_tokens_everything_is_open() {
    let s = TestServer::start().await;
    let (status, _) = s
        .post("/v1/queues/open/messages", json!({ "payload": 1 }))
        .await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(s.get("/v1/queues").await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_missing_or_unknown_token_is_a_401() {
    let mut s = secured().await;
    let answer = s
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    s.token = Some("not-a-token-0123456789".into());
    let answer = s
        .post("/v1/queues/q/messages", json!({ "payload": 1 }))
        .await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "unauthorized");
    s.token = None;
    assert_eq!(
        s.get("/healthz").await.0,
        StatusCode::OK,
        "health needs no token"
    );
    for path in ["/readyz", "/openapi.json", "/metrics"] {
        assert_error(&s.get(path).await, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    s.token = Some(SEND.into());
    assert_eq!(
        s.get("/readyz").await.0,
        StatusCode::OK,
        "readiness takes any token"
    );
    assert_eq!(s.get("/openapi.json").await.0, StatusCode::OK);
    assert_error(&s.get("/metrics").await, StatusCode::FORBIDDEN, "forbidden");
}

#[tokio::test]
async fn each_role_reaches_its_routes_and_no_others() {
    let mut s = secured().await;
    let produce = [
        (
            Method::POST,
            "/v1/queues/q/messages",
            Some(json!({ "payload": 1, "id": "m1" })),
        ),
        (
            Method::POST,
            "/v1/queues/q/batch",
            Some(json!({ "messages": [{ "payload": 2 }] })),
        ),
        (Method::GET, "/v1/queues/q/messages/m1", None),
        (
            Method::POST,
            "/v1/queues/q/messages/m1/reschedule",
            Some(json!({ "delay": 0 })),
        ),
    ];
    let consume = [(
        Method::POST,
        "/v1/queues/q/receive",
        Some(json!({ "max": 1 })),
    )];
    let admin = [
        (Method::GET, "/v1/queues", None),
        (Method::GET, "/v1/queues/q", None),
        (Method::GET, "/v1/queues/q/dead", None),
        (
            Method::POST,
            "/v1/queues/q/purge",
            Some(json!({ "all": true })),
        ),
    ];
    let groups = [
        (SEND, &produce[..]),
        (CONSUME, &consume[..]),
        (ADMIN, &admin[..]),
    ];
    for (token, allowed) in groups {
        for (other, routes) in groups {
            for (method, path, body) in routes {
                s.token = Some(token.into());
                let (status, answer) = s.call(method.clone(), path, body.clone()).await;
                if token == other || token == ADMIN {
                    assert!(
                        status.is_success(),
                        "{token} on {method} {path}: {status} {answer}"
                    );
                } else {
                    assert_error(&(status, answer), StatusCode::FORBIDDEN, "forbidden");
                }
            }
        }
        let _ = allowed;
    }
}

/// Every operation the OpenAPI document lists, with the role its tag names; a token of any
/// other role but admin is refused with 403, and the refused request changes nothing.
#[tokio::test]
async fn every_documented_route_refuses_the_roles_it_is_not_for() {
    let mut s = secured().await;
    s.token = Some(ADMIN.into());
    let (status, doc) = s.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    // A delayed message (so that no lag grows meanwhile), which a request let through would
    // change.
    let (status, _) = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": 1, "id": "m1", "delay": "1h" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let before = state_of(&s).await;

    let mut checked = 0;
    let paths = doc["paths"].as_object().expect("paths");
    for (template, operations) in paths {
        let path = template.replace("{queue}", "q").replace("{id}", "m1");
        for (method, operation) in operations.as_object().expect("operations") {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let tag = operation["tags"][0].as_str().unwrap_or("");
            let owner = match tag {
                "produce" => SEND,
                "consume" => CONSUME,
                "admin" => ADMIN,
                // Any valid token may (browse.rs has its own test of that).
                "probes" | "browse" => continue,
                other => panic!("{method} {template}: tag {other:?} names no role"),
            };
            let body = (method == Method::POST)
                .then(|| json!({ "all": true, "receipts": [], "messages": [] }));
            for token in [SEND, CONSUME] {
                if token == owner {
                    continue;
                }
                s.token = Some(token.into());
                let answer = s.call(method.clone(), &path, body.clone()).await;
                assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
                checked += 1;
            }
        }
    }
    assert!(
        checked >= 20,
        "only {checked} refusals checked: is the document complete?"
    );
    s.token = Some(ADMIN.into());
    assert_eq!(
        state_of(&s).await,
        before,
        "refused requests changed nothing"
    );
}

/// The queue's counts and its one message, as an admin sees them.
async fn state_of(s: &TestServer) -> (serde_json::Value, serde_json::Value) {
    let (_, stats) = s.get("/v1/queues/q").await;
    let (_, message) = s.get("/v1/queues/q/messages/m1").await;
    (stats, message)
}

const MONITOR: &str = "monitor-token-0123456789";

/// Issue 49, item 14: a scraper or a load balancer needs no admin secret. A `monitor` token
/// reads `/metrics` and `/readyz`, and nothing else: no route of the API, no dashboard.
#[tokio::test]
async fn a_monitor_token_reads_metrics_and_readiness_and_nothing_else() {
    let tokens = Tokens::parse(&format!("monitor:{MONITOR}\nadmin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let (_, doc) = s.get("/openapi.json").await;
    let sent = s
        .post(
            "/v1/queues/q/messages",
            json!({ "payload": 1, "id": "m1", "delay": "1h" }),
        )
        .await;
    assert_eq!(sent.0, StatusCode::CREATED);
    let before = state_of(&s).await;

    s.token = Some(MONITOR.into());
    assert_eq!(s.get("/readyz").await.0, StatusCode::OK);
    let (status, metrics) = s.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK, "{metrics}");
    let mut refused = 0;
    for (template, operations) in doc["paths"].as_object().expect("paths") {
        if ["/readyz", "/metrics", "/healthz"].contains(&template.as_str()) {
            continue;
        }
        let path = template.replace("{queue}", "q").replace("{id}", "m1");
        for method in operations.as_object().expect("operations").keys() {
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).expect("method");
            let body = (method == Method::POST)
                .then(|| json!({ "all": true, "receipts": [], "messages": [] }));
            let answer = s.call(method.clone(), &path, body).await;
            assert_error(&answer, StatusCode::FORBIDDEN, "forbidden");
            refused += 1;
        }
    }
    assert!(refused >= 30, "only {refused} routes refused");
    s.token = Some(ADMIN.into());
    assert_eq!(
        state_of(&s).await,
        before,
        "refused requests changed nothing"
    );

    // The dashboard shows messages: no session for a monitor token.
    let login = s
        .http
        .post(format!("{}/ui/login", s.base))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("token={MONITOR}"))
        .send()
        .await
        .expect("login");
    assert_eq!(login.status(), StatusCode::UNAUTHORIZED);
    assert!(login.headers().get("set-cookie").is_none());
}
