//! HTTP request metrics: every request that matched a route is counted and timed in
//! `delayq_http_request_duration_seconds{method, route, status}` (its `_count` is the request
//! count). The route is the template (`/v1/queues/{queue}/messages`), never the path a client
//! sent, so clients cannot grow the series: requests that match no route are not counted
//! here. The time is to the response's head, so a stream (events, SSE) counts until it starts.

use std::time::Instant;

use axum::extract::{MatchedPath, Request};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;

/// The histogram's name.
pub const REQUEST_SECONDS: &str = "delayq_http_request_duration_seconds";

/// The middleware, as a route layer (it needs the matched route).
pub async fn time_each_request(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let method = method_label(request.method());
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map(|path| path.as_str().to_owned());
    let response = next.run(request).await;
    if let Some(route) = route {
        metrics::histogram!(REQUEST_SECONDS, "method" => method, "route" => route,
            "status" => response.status().as_u16().to_string())
        .record(started.elapsed().as_secs_f64());
    }
    response
}

/// The method as a label: the routes' methods by name, anything else as "other".
fn method_label(method: &Method) -> &'static str {
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::DELETE => "DELETE",
        Method::PATCH => "PATCH",
        Method::HEAD => "HEAD",
        _ => "other",
    }
}
