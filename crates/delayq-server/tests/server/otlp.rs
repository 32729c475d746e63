//! `delayq serve --otlp-endpoint`: the spans of a message's life over HTTP (the requests,
//! send, receive, ack; a push) reach an OTLP receiver the test starts, each in the trace
//! its `traceparent` names, with parents and links right.

use std::time::Duration;

use otlp_receiver::{OtlpReceiver, ReceivedSpan};
use redis_fixture::RedisServer;
use reqwest::StatusCode;
use serde_json::{json, Value};

use crate::common::*;
use crate::receiver::Receiver;
use crate::serve::Serve;

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "00f067aa0ba902b7";
const CONSUMER: &str = "b7ad6b7169203331";

fn traceparent(span_id: &str) -> String {
    format!("00-{TRACE_ID}-{span_id}-01")
}

async fn post_traced(serve: &Serve, path: &str, span_id: &str, body: Value) -> (StatusCode, Value) {
    let resp = serve
        .http
        .post(format!("{}{path}", serve.base))
        .header("traceparent", traceparent(span_id))
        .json(&body)
        .send()
        .await
        .expect("request");
    read(resp).await
}

fn named<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no span {name}: {spans:#?}"))
}

async fn received(collector: &OtlpReceiver, names: &[&str]) -> Vec<ReceivedSpan> {
    collector
        .wait_for(Duration::from_secs(20), |spans| {
            names.iter().all(|n| spans.iter().any(|s| s.name == *n))
        })
        .await
        .unwrap_or_else(|seen| panic!("wanted {names:?}, received {seen:#?}"))
}

#[tokio::test]
async fn a_messages_spans_over_http_reach_the_otlp_endpoint_in_its_trace() {
    let redis = RedisServer::start();
    let collector = OtlpReceiver::start().await.expect("OTLP receiver");
    let serve = Serve::start(
        &[
            "--redis-url",
            &redis.url(),
            "--otlp-endpoint",
            &collector.endpoint(),
        ],
        // Export every 100 ms rather than every 5 s.
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;

    let sent = post_traced(
        &serve,
        "/v1/queues/jobs/messages",
        CALLER,
        json!({ "payload": 1, "id": "j" }),
    )
    .await;
    assert_eq!(sent.0, StatusCode::CREATED, "{sent:?}");
    let (status, got) = serve
        .post(
            "/v1/queues/jobs/receive",
            json!({ "max": 1, "lease": "30s", "wait": "0s" }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{got}");
    let delivery = &got["deliveries"][0];
    // The caller's traceparent, as given, for the consumer to continue.
    assert_eq!(delivery["traceparent"], json!(traceparent(CALLER)));
    // The consumer acks from its own span in that trace.
    let receipt = delivery["receipt"].clone();
    let acked = post_traced(
        &serve,
        "/v1/queues/jobs/ack",
        CONSUMER,
        json!({ "receipt": receipt }),
    )
    .await;
    assert_eq!(acked.0, StatusCode::NO_CONTENT);

    let spans = received(
        &collector,
        &[
            "POST /v1/queues/{queue}/messages",
            "send jobs",
            "POST /v1/queues/{queue}/receive",
            "receive jobs",
            "POST /v1/queues/{queue}/ack",
            "ack jobs",
        ],
    )
    .await;
    assert!(spans.iter().all(|s| s.service == "delayq"));
    let request = named(&spans, "POST /v1/queues/{queue}/messages");
    assert_eq!(
        (
            request.trace_id.as_str(),
            request.parent_span_id.as_deref(),
            request.kind
        ),
        (TRACE_ID, Some(CALLER), 2)
    );
    assert_eq!(request.attribute("http.response.status_code"), Some("201"));
    let send = named(&spans, "send jobs");
    assert_eq!(send.trace_id, TRACE_ID);
    assert_eq!(send.parent_span_id.as_ref(), Some(&request.span_id));
    assert_eq!(send.attribute("messaging.message.id"), Some("j"));
    let receive = named(&spans, "receive jobs");
    assert_eq!(
        receive.links,
        vec![(TRACE_ID.to_owned(), CALLER.to_owned())]
    );
    let ack_request = named(&spans, "POST /v1/queues/{queue}/ack");
    assert_eq!(ack_request.parent_span_id.as_deref(), Some(CONSUMER));
    let ack = named(&spans, "ack jobs");
    assert_eq!(ack.parent_span_id.as_ref(), Some(&ack_request.span_id));
    assert_eq!(ack.trace_id, TRACE_ID);
    serve.terminate();
}

#[tokio::test]
async fn a_pushed_request_is_a_child_of_its_push_span() {
    let redis = RedisServer::start();
    let collector = OtlpReceiver::start().await.expect("OTLP receiver");
    let receiver = Receiver::start().await;
    let serve = Serve::start(
        &[
            "--redis-url",
            &redis.url(),
            "--otlp-endpoint",
            &collector.endpoint(),
            "--push-allow",
            "127.0.0.0/8",
        ],
        &[("OTEL_BSP_SCHEDULE_DELAY", "100")],
    )
    .await;
    let resp = serve
        .http
        .put(format!("{}/v1/queues/hooks/push", serve.base))
        .json(&json!({ "url": format!("{}/hook", receiver.url) }))
        .send()
        .await
        .expect("request");
    assert_eq!(resp.status(), StatusCode::OK);
    // Sent without trace context: the trace starts at the server.
    let (status, _) = serve
        .post(
            "/v1/queues/hooks/messages",
            json!({ "payload": 1, "id": "p" }),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED);
    wait_until(Duration::from_secs(10), "the push", || async {
        !receiver.for_id("p").is_empty()
    })
    .await;

    let spans = received(
        &collector,
        &["send hooks", "process hooks", "push hooks", "ack hooks"],
    )
    .await;
    let send = named(&spans, "send hooks");
    let process = named(&spans, "process hooks");
    assert_eq!(process.trace_id, send.trace_id);
    assert_eq!(process.parent_span_id.as_ref(), Some(&send.span_id));
    let push = named(&spans, "push hooks");
    assert_eq!(push.parent_span_id.as_ref(), Some(&process.span_id));
    assert_eq!(push.attribute("http.response.status_code"), Some("200"));
    let header = receiver.for_id("p")[0].header("traceparent").to_owned();
    assert_eq!(header, format!("00-{}-{}-01", push.trace_id, push.span_id));
    let ack = named(&spans, "ack hooks");
    assert_eq!(ack.parent_span_id.as_ref(), Some(&send.span_id));
    serve.terminate();
}
