//! One group of a queue: its messages delayed, ready and in flight, its settings, and (for
//! admins) pause, resume, and its own concurrency, weight and rate limit.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq::GroupInfo;
use maud::{html, Markup};
use serde::Deserialize;

use super::layout;
use super::session::Session;
use super::text::{group_path, queue_path};
use super::visitor::Visitor;
use crate::state::AppState;

#[derive(Deserialize, Default)]
pub struct GroupQuery {
    done: Option<String>,
}

/// `GET /ui/queues/{queue}/groups/{group}`.
pub async fn page(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path((name, group)): axum::extract::Path<(String, String)>,
    Query(query): Query<GroupQuery>,
) -> Response {
    let found = match app.queue(&name) {
        Ok(q) => q.groups().get(&group).await.map_err(|e| e.to_string()),
        Err(e) => Err(e.message().to_owned()),
    };
    let (status, body) = match found {
        Ok(g) => (
            StatusCode::OK,
            render(&session, &name, &g, query.done.as_deref()),
        ),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            html! { p.notice.error role="alert" { (e) } },
        ),
    };
    (status, layout::page(&group, Some(&session), false, body)).into_response()
}

fn render(session: &Session, queue: &str, g: &GroupInfo, done: Option<&str>) -> Markup {
    let act = format!("{}/act", group_path(queue, &g.name));
    html! {
        h1 { "Group " (g.name) }
        p { "Of queue " a href=(queue_path(queue)) { (queue) } }
        (layout::notice(done))
        div.cards {
            div.card data-count="delayed" { div.n { (g.delayed) } div.l { "delayed" } }
            div.card data-count="ready" { div.n { (g.ready) } div.l { "ready" } }
            div.card data-count="in_flight" { div.n { (g.in_flight) } div.l { "in flight" } }
            div.card #group-state { div.n { @if g.paused { span.warn { "paused" } } @else { "running" } } div.l { "state" } }
        }
        dl.fields {
            dt { "Concurrency" }
            dd #group-concurrency {
                @match g.concurrency { Some(n) => { (n) " in flight at most" }, None => { "no limit" } }
                @if g.own_concurrency.is_some() { " (its own)" } @else { " (the queue's)" }
            }
            dt { "Weight" } dd #group-weight { (g.weight) " per turn" }
            dt { "Rate limit" }
            dd #group-rate-limit {
                @match g.rate_limit { Some(l) => { (l.per_second) "/s, burst " (l.burst) }, None => { "none" } }
                @if g.own_rate_limit.is_some() { " (its own)" } @else { " (the queue's)" }
            }
        }
        @if session.can_act() {
            form.row method="post" action=(act) {
                (layout::csrf(session))
                @if g.paused {
                    button.primary #group-resume type="submit" name="action" value="resume" { "Resume" }
                } @else {
                    button #group-pause type="submit" name="action" value="pause" { "Pause" }
                }
            }
            form.row #group-settings method="post" action=(act) {
                (layout::csrf(session))
                input type="hidden" name="action" value="settings";
                label { "Its own concurrency "
                    input type="number" name="limit" min="1" placeholder="the queue's" aria-label="Its own concurrency"
                        value=[g.own_concurrency];
                }
                label { "Weight "
                    input type="number" name="weight" min="1" max="1000" aria-label="Weight" value=(g.weight);
                }
                label { "Its own rate limit "
                    input type="number" name="rate" min="1" placeholder="the queue's" aria-label="Its own rate limit"
                        value=[g.own_rate_limit.map(|l| l.per_second)];
                    " /s, burst "
                    input type="number" name="burst" min="1" placeholder="1" aria-label="Its own burst"
                        value=[g.own_rate_limit.map(|l| l.burst)];
                }
                button type="submit" { "Set" }
            }
        }
    }
}
