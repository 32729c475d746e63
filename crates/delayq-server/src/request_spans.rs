//! A span per HTTP request, when spans are exported (`--otlp-endpoint`): named by method
//! and route (`POST /v1/queues/{queue}/messages`), a child of the request's W3C
//! `traceparent` header when it has a valid one. The library's spans (send, receive, ack,
//! nack) nest under it, so a caller's trace goes on through the server. It reads headers
//! only, never a body.

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

/// Runs the rest of the request in its span: a pass-through when spans are off. Called by
/// the one request layer (`request_layer.rs`).
pub async fn in_span(request: Request, next: Next) -> Response {
    if !delayq::telemetry::is_enabled() {
        return next.run(request).await;
    }
    let method = request.method().clone();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("", |path| path.as_str())
        .to_owned();
    let span = tracing::info_span!(
        "request",
        otel.name = %format_args!("{method} {route}"),
        otel.kind = "server",
        http.request.method = %method,
        http.route = %route,
        http.response.status_code = tracing::field::Empty,
        // The token's name (never its secret), set once it is checked (`api/access.rs`).
        delayq.token = tracing::field::Empty,
    );
    if let Some(traceparent) = request
        .headers()
        .get("traceparent")
        .and_then(|v| v.to_str().ok())
    {
        delayq::telemetry::join_trace(&span, traceparent);
    }
    let response = next.run(request).instrument(span.clone()).await;
    span.record("http.response.status_code", response.status().as_u16());
    response
}
