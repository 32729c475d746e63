//! An OTLP/HTTP trace receiver for tests: it listens on a free loopback port, takes the
//! protobuf `ExportTraceServiceRequest`s an exporter posts to `/v1/traces`, and keeps each
//! span with what a test checks (name, ids, parent, links, attributes), so that tests see
//! the spans a real exporter sent over a real connection, not a mock of one.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use prost::Message as _;

/// A span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    /// The span's name.
    pub name: String,
    /// The `service.name` of the process that sent it.
    pub service: String,
    /// Trace id, 32 lowercase hex digits.
    pub trace_id: String,
    /// Span id, 16 lowercase hex digits.
    pub span_id: String,
    /// The parent's span id; `None` for a root span.
    pub parent_span_id: Option<String>,
    /// OTLP's span kind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    pub kind: i32,
    /// The spans it links to, as (trace id, span id).
    pub links: Vec<(String, String)>,
    /// Attributes whose values are strings or integers, as text.
    pub attributes: HashMap<String, String>,
    /// True when the span's status is an error.
    pub failed: bool,
}

impl ReceivedSpan {
    /// The attribute `key` as text, if present.
    pub fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// A receiver running on a loopback port until dropped.
pub struct OtlpReceiver {
    addr: SocketAddr,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    task: tokio::task::JoinHandle<()>,
}

impl OtlpReceiver {
    /// Starts a receiver on a free loopback port, in the current tokio runtime.
    pub async fn start() -> std::io::Result<OtlpReceiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let spans = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(spans.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(OtlpReceiver { addr, spans, task })
    }

    /// The base URL to give an exporter (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Waits until `done` holds of the spans received, up to `within`; returns them, or the
    /// spans seen so far as the error when the time ran out.
    pub async fn wait_for(
        &self,
        within: Duration,
        done: impl Fn(&[ReceivedSpan]) -> bool,
    ) -> Result<Vec<ReceivedSpan>, Vec<ReceivedSpan>> {
        let deadline = Instant::now() + within;
        loop {
            let spans = self.spans();
            if done(&spans) {
                return Ok(spans);
            }
            if Instant::now() >= deadline {
                return Err(spans);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State(spans): State<Arc<Mutex<Vec<ReceivedSpan>>>>,
    body: Bytes,
) -> impl IntoResponse {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new()).into_response();
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| text(kv.value.as_ref()?.value.as_ref()?))
            .unwrap_or_default();
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                received.push(ReceivedSpan {
                    name: span.name,
                    service: service.clone(),
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: (!span.parent_span_id.is_empty())
                        .then(|| hex(&span.parent_span_id)),
                    kind: span.kind,
                    links: span
                        .links
                        .iter()
                        .map(|l| (hex(&l.trace_id), hex(&l.span_id)))
                        .collect(),
                    attributes: span
                        .attributes
                        .iter()
                        .filter_map(|kv| {
                            Some((kv.key.clone(), text(kv.value.as_ref()?.value.as_ref()?)?))
                        })
                        .collect(),
                    // OTLP's STATUS_CODE_ERROR.
                    failed: span.status.is_some_and(|s| s.code == 2),
                });
            }
        }
    }
    spans
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .extend(received);
    // An empty ExportTraceServiceResponse: every span accepted.
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        Vec::new(),
    )
        .into_response()
}

fn text(value: &Value) -> Option<String> {
    match value {
        Value::StringValue(s) => Some(s.clone()),
        Value::IntValue(i) => Some(i.to_string()),
        Value::BoolValue(b) => Some(b.to_string()),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut out, b| {
        let _ = write!(out, "{b:02x}");
        out
    })
}
