//! The web dashboard at `/ui`: server-rendered pages for the person on call, in the same
//! binary, with nothing fetched from the network at run time.
//!
//! * `login.rs`: the login form and the session cookie (`session.rs`).
//! * `overview.rs`: every queue, its counts, rates and lateness.
//! * `queue_page.rs`: one queue's charts (`chart.rs`), its messages by state, search,
//!   schedules and push target.
//! * `message_page.rs`: one message, and what can be done to it.
//! * `actions.rs`: every form's POST: admins only, each with the session's CSRF token.
//! * `layout.rs`: the page shell, its CSS and its little JavaScript.

mod actions;
mod chart;
mod layout;
mod login;
mod message_page;
mod overview;
mod queue_page;
pub mod session;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;
use session::Session;

/// The dashboard's routes, under `/ui`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(overview::page))
        .route("/ui/", get(|| async { Redirect::to("/ui") }))
        .route("/ui/login", get(login::form).post(login::submit))
        .route("/ui/logout", post(login::logout))
        .route("/ui/queues/{queue}", get(queue_page::page))
        .route("/ui/queues/{queue}/search", get(queue_page::search_step))
        .route("/ui/queues/{queue}/confirm", get(actions::confirm))
        .route("/ui/queues/{queue}/act", post(actions::queue_action))
        .route("/ui/queues/{queue}/messages/{id}", get(message_page::page))
        .route(
            "/ui/queues/{queue}/messages/{id}/act",
            post(actions::message_action),
        )
}

/// A visitor with a valid session. A request without one is sent to the login form (a page)
/// or refused (anything else).
pub struct Visitor(pub Session);

impl FromRequestParts<AppState> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match session_of(&parts.headers, state) {
            Some(s) => Ok(Visitor(s)),
            None if parts.method == axum::http::Method::GET => {
                Err(Redirect::to("/ui/login").into_response())
            }
            None => Err((StatusCode::UNAUTHORIZED, "log in first").into_response()),
        }
    }
}

/// The dashboard page of queue `name`.
pub fn queue_path(name: &str) -> String {
    format!("/ui/queues/{}", segment(name))
}

/// The session the request's cookie proves, if any (see [`session::verify`]).
pub fn session_of(headers: &axum::http::HeaderMap, state: &AppState) -> Option<Session> {
    let cookies = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    session::verify(
        state.tokens(),
        session::cookie_value(cookies, session::COOKIE),
    )
}

/// `text` for a URL path segment: everything but unreserved characters percent-encoded
/// (message ids may hold `/`, `:` and `@`).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `ms` since the Unix epoch as a UTC time to the second, as people read it.
pub fn utc(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    let text = humantime::format_rfc3339_seconds(t).to_string();
    text.replace('T', " ").replace('Z', " UTC")
}

/// A span of ms as people read it: `850 ms`, `12.5 s`, `3 min`, `2.0 h`, `4.5 d`.
pub fn span(ms: f64) -> String {
    let abs = ms.abs();
    if abs < 1_000.0 {
        format!("{ms:.0} ms")
    } else if abs < 60_000.0 {
        format!("{:.1} s", ms / 1_000.0)
    } else if abs < 3_600_000.0 {
        format!("{:.0} min", ms / 60_000.0)
    } else if abs < 86_400_000.0 {
        format!("{:.1} h", ms / 3_600_000.0)
    } else {
        format!("{:.1} d", ms / 86_400_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_times_read_as_intended() {
        assert_eq!(segment("order:1/a@b c"), "order%3A1%2Fa%40b%20c");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(span(850.0), "850 ms");
        assert_eq!(span(12_500.0), "12.5 s");
        assert_eq!(span(-180_000.0), "-3 min");
    }
}
