//! Trace context over HTTP: a send's `traceparent` (its header, or the JSON field, which wins)
//! comes back with the delivery a receive hands out and as the `traceparent` header of a
//! pushed request; a batch's messages take the header unless they carry their own; a
//! malformed one is a 400 with nothing written.

use std::time::Duration;

use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::common::*;
use crate::receiver::Receiver;
use crate::ui::{page_as, session_cookie};

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const OTHER: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

async fn send_traced(s: &TestServer, path: &str, body: serde_json::Value) -> StatusCode {
    s.http
        .post(format!("{}{path}", s.base))
        .header("traceparent", TRACE)
        .json(&body)
        .send()
        .await
        .expect("request")
        .status()
}

#[tokio::test]
async fn a_traceparent_crosses_the_queue_to_the_consumer() {
    let s = TestServer::start().await;
    let sent = send_traced(
        &s,
        "/v1/queues/q/messages",
        json!({ "payload": 1, "id": "h" }),
    )
    .await;
    assert_eq!(sent, StatusCode::CREATED);
    let field = json!({ "payload": 2, "id": "f", "traceparent": OTHER });
    assert_eq!(
        send_traced(&s, "/v1/queues/q/messages", field).await,
        StatusCode::CREATED
    );
    let raw = s
        .http
        .post(format!("{}/v1/queues/q/messages?id=r", s.base))
        .header("traceparent", TRACE)
        .body("raw bytes")
        .send()
        .await
        .expect("request");
    assert_eq!(raw.status(), StatusCode::CREATED);
    let batch = json!({ "messages": [
        { "payload": 3, "id": "b1" },
        { "payload": 4, "id": "b2", "traceparent": OTHER },
    ] });
    assert_eq!(
        send_traced(&s, "/v1/queues/q/batch", batch).await,
        StatusCode::OK
    );
    s.post(
        "/v1/queues/q/messages",
        json!({ "payload": 5, "id": "none" }),
    )
    .await;

    let got = receive(&s, "q", 10, "0s").await;
    let trace_of = |id: &str| {
        got.iter()
            .find(|d| d["id"] == id)
            .map(|d| d["traceparent"].clone())
            .expect("delivered")
    };
    assert_eq!(trace_of("h"), json!(TRACE), "from the header");
    assert_eq!(trace_of("f"), json!(OTHER), "the field wins");
    assert_eq!(trace_of("r"), json!(TRACE), "a raw send's header");
    assert_eq!(trace_of("b1"), json!(TRACE), "a batch takes the header");
    assert_eq!(trace_of("b2"), json!(OTHER));
    assert_eq!(trace_of("none"), serde_json::Value::Null);
}

#[tokio::test]
async fn a_pushed_request_carries_the_trace() {
    let limits = Limits {
        push_allow: vec!["127.0.0.0/8".parse().expect("network")],
        ..Limits::default()
    };
    let s = TestServer::start_with(limits, Tokens::default()).await;
    let receiver = Receiver::start().await;
    let (status, target) = s
        .call(
            Method::PUT,
            "/v1/queues/pushed/push",
            Some(json!({ "url": format!("{}/hook", receiver.url) })),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{target}");
    let sent = send_traced(
        &s,
        "/v1/queues/pushed/messages",
        json!({ "payload": 1, "id": "p" }),
    )
    .await;
    assert_eq!(sent, StatusCode::CREATED);
    wait_until(Duration::from_secs(10), "the push", || async {
        !receiver.for_id("p").is_empty()
    })
    .await;
    assert_eq!(receiver.for_id("p")[0].header("traceparent"), TRACE);
}

#[tokio::test]
async fn a_malformed_traceparent_is_a_400_and_nothing_is_written() {
    let s = TestServer::start().await;
    s.post("/v1/queues/q/messages", json!({ "payload": 0 }))
        .await;
    let keys = all_keys(&s.redis);
    let field = json!({ "payload": 1, "traceparent": "00-not-a-trace" });
    let (status, body) = s.post("/v1/queues/q/messages", field).await;
    assert_error(&(status, body), StatusCode::BAD_REQUEST, "invalid_option");
    let resp = s
        .http
        .post(format!("{}/v1/queues/q/batch", s.base))
        .header("traceparent", "garbage")
        .json(&json!({ "messages": [{ "payload": 1 }] }))
        .send()
        .await
        .expect("request");
    assert_error(&read(resp).await, StatusCode::BAD_REQUEST, "invalid_option");
    assert_eq!(all_keys(&s.redis), keys, "nothing written");
}

#[tokio::test]
async fn a_messages_trace_shows_in_its_get_its_page_and_the_cli() {
    const ADMIN: &str = "admin-token-0123456789";
    let tokens = Tokens::parse(&format!("admin:{ADMIN}")).expect("tokens");
    let mut s = TestServer::start_with(Limits::default(), tokens).await;
    s.token = Some(ADMIN.into());
    let body = json!({ "payload": 1, "id": "t", "delay": "1h", "traceparent": TRACE });
    assert_eq!(
        s.post("/v1/queues/q/messages", body).await.0,
        StatusCode::CREATED
    );
    s.post("/v1/queues/q/messages", json!({ "payload": 2, "id": "u" }))
        .await;

    let (_, got) = s.get("/v1/queues/q/messages/t").await;
    assert_eq!(got["traceparent"], json!(TRACE));
    let (_, untraced) = s.get("/v1/queues/q/messages/u").await;
    assert!(untraced.get("traceparent").is_none(), "{untraced}");
    let cli = crate::cli::json(&s.redis, &["get", "q", "t"]);
    assert_eq!(cli["traceparent"], json!(TRACE));

    let http = crate::ui::form_client();
    let admin = session_cookie(&s, ADMIN).await;
    let page = page_as(&http, &s, &admin, "/ui/queues/q/messages/t").await;
    assert!(
        page.contains("4bf92f3577b34da6a3ce929d0e0e4736"),
        "the trace id, to look up in a tracing UI: {page}"
    );
}
