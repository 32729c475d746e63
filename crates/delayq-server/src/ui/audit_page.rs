//! `GET /ui/audit`: the audit log's newest entries (`audit/mod.rs`), for an admin session;
//! an admin of some queues sees those queues' entries only, as over the API.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::layout;
use super::visitor::Visitor;
use crate::state::AppState;

/// How many entries the page shows (the API and the CLI page further).
const SHOWN: usize = 200;

/// `GET /ui/audit`.
pub async fn page(State(state): State<AppState>, Visitor(session): Visitor) -> Response {
    if !session.can_act() {
        return (StatusCode::FORBIDDEN, "the audit log is an admin's").into_response();
    }
    let page = crate::audit::read(&state, session.caller.as_ref(), None, None, SHOWN).await;
    let body = match page {
        Err(e) => html! { p.notice.error role="alert" { "Redis: " (e) } },
        Ok(page) => html! {
            h1 { "Audit log" }
            p { "Who did what, newest first: admin and destructive actions, refused attempts too. "
                "The newest " (SHOWN) "; " code { "delayq audit" } " and " code { "GET /v1/audit" }
                " page further." }
            table {
                thead { tr { th { "When (entry)" } th { "Who" } th { "Via" } th { "Action" }
                    th { "Queue" } th { "Ids" } th { "From" } th { "Outcome" } } }
                tbody {
                    @for e in &page.entries {
                        tr {
                            td { (e.id) } td { (e.actor) } td { (e.via) } td { (e.action) }
                            td { (e.queue) } td { (e.ids.join(", ")) } td { (e.from) }
                            td { (e.outcome) " " (e.status) }
                        }
                    }
                }
            }
        },
    };
    layout::page("Audit log", Some(&session), false, body).into_response()
}
