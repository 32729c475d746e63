//! `/openapi.json`: an OpenAPI 3.1 document generated from the code. The router and the
//! document are built from the same annotations; these tests check that every documented
//! route is served and that the document lists every route.

use std::collections::BTreeSet;

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};

use crate::common::*;

/// Every route the server has (besides `/openapi.json` itself), as `METHOD path`.
const ROUTES: &[&str] = &[
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "GET /v1/queues",
    "GET /v1/queues/{queue}",
    "PUT /v1/queues/{queue}",
    "DELETE /v1/queues/{queue}",
    "POST /v1/queues/{queue}/messages",
    "GET /v1/queues/{queue}/messages",
    "POST /v1/queues/{queue}/batch",
    "POST /v1/queues/{queue}/cancel",
    "GET /v1/queues/{queue}/messages/{id}",
    "DELETE /v1/queues/{queue}/messages/{id}",
    "POST /v1/queues/{queue}/messages/{id}/reschedule",
    "POST /v1/queues/{queue}/receive",
    "POST /v1/receive",
    "POST /v1/queues/{queue}/ack",
    "POST /v1/queues/{queue}/nack",
    "POST /v1/queues/{queue}/extend",
    "POST /v1/queues/{queue}/release",
    "GET /v1/queues/{queue}/dead",
    "GET /v1/queues/{queue}/events",
    "GET /v1/queues/{queue}/webhooks",
    "PUT /v1/queues/{queue}/webhooks",
    "DELETE /v1/queues/{queue}/webhooks",
    "POST /v1/queues/{queue}/requeue",
    "POST /v1/queues/{queue}/purge",
    "PATCH /v1/queues/{queue}",
    "POST /v1/queues/{queue}/pause",
    "POST /v1/queues/{queue}/resume",
    "PUT /v1/queues/{queue}/push",
    "GET /v1/queues/{queue}/push",
    "DELETE /v1/queues/{queue}/push",
    "GET /v1/queues/{queue}/schedules",
    "PUT /v1/queues/{queue}/schedules/{name}",
    "GET /v1/queues/{queue}/schedules/{name}",
    "DELETE /v1/queues/{queue}/schedules/{name}",
    "GET /v1/queues/{queue}/format",
    "POST /v1/queues/{queue}/upgrade",
    "POST /v1/queues/{queue}/rotate-keys",
    "GET /v1/queues/{queue}/groups",
    "GET /v1/queues/{queue}/groups/{group}",
    "PATCH /v1/queues/{queue}/groups/{group}",
    "PATCH /v1/queues/{queue}/schedules/{name}",
    "POST /v1/queues/{queue}/schedules/{name}/backfill",
    "GET /v1/processes",
    "GET /v1/audit",
];

async fn document(s: &TestServer) -> Value {
    let (status, doc) = s.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    doc
}

fn documented(doc: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            out.insert(format!("{} {path}", method.to_uppercase()));
        }
    }
    out
}

#[tokio::test]
async fn the_document_lists_every_route_and_nothing_else() {
    let s = TestServer::start().await;
    let doc = document(&s).await;
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "{}",
        doc["openapi"]
    );
    let expected: BTreeSet<String> = ROUTES.iter().map(|r| r.to_string()).collect();
    assert_eq!(documented(&doc), expected);
    assert!(doc["components"]["securitySchemes"]["bearer"].is_object());
}

#[tokio::test]
async fn every_documented_route_is_served() {
    let s = TestServer::start().await;
    for route in documented(&document(&s).await) {
        let (method, path) = route.split_once(' ').expect("METHOD path");
        let path = path.replace("{queue}", "q").replace("{id}", "some-id");
        let method: Method = method.parse().expect("method");
        let body = (method != Method::GET && method != Method::DELETE).then(|| json!({}));
        let resp = s
            .http
            .request(method.clone(), format!("{}{path}", s.base))
            .json(&body)
            .send()
            .await
            .expect("request");
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        assert!(
            !text.contains("no_route") && status != StatusCode::METHOD_NOT_ALLOWED,
            "{route} is documented but not served: {status} {text}"
        );
    }
}

/// The default retry policy is in the document, as the library applies it.
#[tokio::test]
async fn the_send_body_states_the_default_retry_policy() {
    let s = TestServer::start().await;
    let (_, api) = s.get("/openapi.json").await;
    let send = &api["components"]["schemas"]["SendBody"]["properties"];
    assert_eq!(
        send["max_attempts"]["default"],
        u64::from(delayq::DEFAULT_MAX_ATTEMPTS),
        "{send}"
    );
    assert_eq!(
        send["backoff"]["default"],
        serde_json::json!({ "exponential": { "base": "1s", "cap": "10m", "factor": 2, "jitter_percent": 10 } }),
        "{send}"
    );
    assert_eq!(
        delayq::Backoff::default(),
        delayq::Backoff::exponential(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(600)
        )
        .with_jitter(10),
        "the library's default"
    );
}

/// The properties a schema documents, its own and those of the schemas it is made of
/// (`allOf`, a flattened part).
fn properties(doc: &Value, schema: &Value) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default();
    if let Some(name) = schema["$ref"].as_str().and_then(|r| r.rsplit('/').next()) {
        out.extend(properties(doc, &doc["components"]["schemas"][name]));
    }
    for part in schema["allOf"].as_array().into_iter().flatten() {
        out.extend(properties(doc, part));
    }
    out
}

#[tokio::test]
async fn every_answer_that_shows_a_message_documents_its_priority_group_and_deadline() {
    let s = TestServer::start().await;
    let doc = document(&s).await;
    for schema in ["MessageOut", "DeliveryOut", "SummaryOut"] {
        let documented = properties(&doc, &doc["components"]["schemas"][schema]);
        for field in ["priority", "group", "expires_at_ms", "id"] {
            assert!(
                documented.contains(field),
                "{schema} does not document {field}: {documented:?}"
            );
        }
    }
    // And a delivery shows them.
    let (status, _) = s
        .post(
            "/v1/queues/shown/messages",
            serde_json::json!({ "payload": "x", "group": "g", "ttl": "1h", "priority": 7 }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    let got = receive(&s, "shown", 1, "5s").await;
    assert_eq!(
        (
            &got[0]["priority"],
            &got[0]["group"],
            got[0]["expires_at_ms"].is_u64()
        ),
        (&serde_json::json!(7), &serde_json::json!("g"), true)
    );
}
