//! HTTP request metrics: every request that matched a route is counted and timed in
//! `delayq_http_request_duration_seconds{method, route, status}` (its `_count` is the request
//! count). The route is the template (`/v1/queues/{queue}/messages`), never the path a client
//! sent, so clients cannot grow the series: requests that match no route are not counted
//! here. The time is to the response's head, so a stream (events, SSE) counts until it starts.

use std::collections::HashMap;
use std::sync::{LazyLock, RwLock};

use axum::http::Method;
use metrics::Histogram;

/// The histogram's name.
pub const REQUEST_SECONDS: &str = "delayq_http_request_duration_seconds";

/// Records one request that matched `route`, answered `status` after `elapsed` seconds.
pub fn record(method: &Method, route: &str, status: u16, elapsed: f64) {
    histogram(method_label(method), route, status).record(elapsed);
}

/// Each series' handle, by route, then method and status: a request finds its own under a
/// read lock without allocating (the recorder's own lookup builds the labels every time).
type Handles = HashMap<String, Vec<((&'static str, u16), Histogram)>>;

static HANDLES: LazyLock<RwLock<Handles>> = LazyLock::new(RwLock::default);

/// The histogram of `method`, `route` and `status`, made on first use.
fn histogram(method: &'static str, route: &str, status: u16) -> Histogram {
    let found = |handles: &Handles| {
        handles.get(route).and_then(|series| {
            series
                .iter()
                .find(|(key, _)| *key == (method, status))
                .map(|(_, h)| h.clone())
        })
    };
    if let Some(h) = found(&HANDLES.read().unwrap_or_else(|p| p.into_inner())) {
        return h;
    }
    let mut handles = HANDLES.write().unwrap_or_else(|p| p.into_inner());
    if let Some(h) = found(&handles) {
        return h;
    }
    let h = metrics::histogram!(REQUEST_SECONDS, "method" => method, "route" => route.to_owned(),
        "status" => status.to_string());
    handles
        .entry(route.to_owned())
        .or_default()
        .push(((method, status), h.clone()));
    h
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
