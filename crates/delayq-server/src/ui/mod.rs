//! The web dashboard at `/ui`: server-rendered pages for the person on call, in the same
//! binary, with nothing fetched from the network at run time.
//!
//! * `login.rs`: the login form and the session cookie (`session.rs`).
//! * `overview.rs`: every queue, its counts, rates and lateness.
//! * `queue_page.rs`: one queue's charts (`chart.rs`), its messages by state, search,
//!   schedules and push target.
//! * `message_page.rs`: one message, and what can be done to it.
//! * `event_feed.rs`: a queue's events, live on its page, and a message's timeline.
//! * `group_page.rs`: one group, its counts and settings.
//! * `actions.rs`: every form's POST: admins only, each with the session's CSRF token;
//!   `bulk_cancel.rs`: cancelling a state's messages, or a search's, after asking.
//! * `layout.rs`: the page shell, its CSS and its little JavaScript.
//! * `visitor.rs`: who may see a page (a valid session); `text.rs`: how paths, times and
//!   spans are written on the pages.

mod actions;
mod audit_page;
mod audited_actions;
mod bulk_cancel;
mod chart;
mod event_feed;
mod group_page;
mod layout;
mod login;
mod message_page;
mod overview;
mod queue_page;
pub mod session;
mod text;
mod visitor;

pub use text::segment;

use axum::extract::Request;
use axum::http::{header, HeaderValue};
use axum::middleware::Next;
use axum::response::{Redirect, Response};
use axum::routing::{get, post};
use axum::Router;

use crate::state::AppState;

/// The dashboard's routes, under `/ui`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/ui", get(overview::page))
        .route("/ui/", get(|| async { Redirect::to("/ui") }))
        .route("/ui/login", get(login::form).post(login::submit))
        .route("/ui/logout", post(login::logout))
        .route("/ui/audit", get(audit_page::page))
        .route("/ui/queues/{queue}", get(queue_page::page))
        .route("/ui/queues/{queue}/search", get(queue_page::search_step))
        .route("/ui/queues/{queue}/events", get(event_feed::stream))
        .route("/ui/queues/{queue}/confirm", get(actions::confirm))
        .route(
            "/ui/queues/{queue}/act",
            post(audited_actions::queue_action),
        )
        .route("/ui/queues/{queue}/groups/{group}", get(group_page::page))
        .route(
            "/ui/queues/{queue}/groups/{group}/act",
            post(audited_actions::group_action),
        )
        .route("/ui/queues/{queue}/messages/{id}", get(message_page::page))
        .route(
            "/ui/queues/{queue}/messages/{id}/act",
            post(audited_actions::message_action),
        )
        .layer(axum::middleware::from_fn(with_policy))
}

/// Adds the dashboard's Content Security Policy (`layout.rs`) to each of its answers.
async fn with_policy(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(layout::content_security_policy()),
    );
    response
}
