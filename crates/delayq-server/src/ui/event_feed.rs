//! The dashboard's view of a queue's events: the queue page's feed (the latest events,
//! rendered with the page, then kept live by the script from `/ui/queues/{queue}/events`,
//! a Server-Sent Events stream for the session) and its webhooks, and a message page's
//! timeline.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use delayq::{Event, EventFilter, EventStart, Stats, Timeline};
use maud::{html, Markup};

use super::layout;
use super::session::Session;
use super::text::{queue_path, segment, utc};
use super::visitor::Visitor;
use crate::state::AppState;
use crate::webhooks::config::Webhooks;

/// Events the queue page shows when it loads; the script keeps up to twice as many.
pub const FEED: usize = 25;

/// The queue page's Events section: the feed, or that the queue records none; and for an
/// admin, the form that turns recording on or off.
pub fn section(
    session: &Session,
    queue: &str,
    (stats, latest): (&Stats, &[Event]),
    webhooks: Option<&Webhooks>,
) -> Markup {
    let base = queue_path(queue);
    html! {
        h2 { "Events" }
        @if session.can_act() {
            form.row #events-setting method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                label { "Keep about "
                    input type="number" name="limit" min="1" placeholder=(delayq::DEFAULT_EVENTS_KEPT)
                        aria-label="Events kept" value=[stats.events_kept];
                    " events per partition "
                }
                button type="submit" name="action" value="events" {
                    @if stats.events_kept.is_some() { "Set" } @else { "Record events" }
                }
                @if stats.events_kept.is_some() {
                    button.danger type="submit" name="action" value="events_off" { "Stop and drop them" }
                }
            }
        }
        @if let Some(w) = webhooks {
            p #webhooks { "Sent to "
                @for (i, hook) in w.hooks.iter().enumerate() {
                    @if i > 0 { ", " }
                    code { (hook.url) }
                    " (" (if hook.kinds.is_empty() { "every kind".to_owned() } else { hook.kinds.join(", ") }) ")"
                }
            }
        }
        @if stats.events_kept.is_none() {
            p.muted #events-off { "This queue records no events." }
        } @else {
            p.muted { (stats.events) " kept; new ones appear here as they happen." }
            div.scroll { table #events data-feed=(format!("{base}/events")) data-queue-path=(base) {
                thead { tr { th { "At" } th { "Event" } th { "Message" } th { "Details" } } }
                tbody {
                    @for e in latest { (row(&base, e)) }
                }
            } }
        }
    }
}

/// A message page's Timeline section.
pub fn timeline(timeline: &Timeline) -> Markup {
    html! {
        @if !timeline.events.is_empty() {
            h2 { "Timeline" }
            @if !timeline.complete { p.muted { "Its latest events; older ones are past what a page looks through." } }
            div.scroll { table #timeline {
                thead { tr { th { "At" } th { "Event" } th { "Details" } } }
                tbody {
                    @for e in &timeline.events {
                        tr data-kind=(e.kind.as_str()) { td { (utc(e.at_ms)) } td { (e.kind.as_str()) } td.preview { (details(e)) } }
                    }
                }
            } }
        }
    }
}

fn row(base: &str, e: &Event) -> Markup {
    html! {
        tr data-kind=(e.kind.as_str()) data-id=(e.id) {
            td { (utc(e.at_ms)) }
            td { (e.kind.as_str()) }
            td { a href=(format!("{base}/messages/{}", segment(&e.id))) { (e.id) } }
            td.preview { (details(e)) }
        }
    }
}

/// What an event says besides its kind: the attempt, the due time, the error. The script
/// writes the same for the events it adds (`app.js`, `eventDetails`).
fn details(e: &Event) -> String {
    let mut parts = Vec::new();
    if let Some(n) = e.attempt {
        parts.push(format!("attempt {n}"));
    }
    if let Some(due) = e.due_ms {
        parts.push(format!("due {}", utc(due)));
    }
    if let Some(detail) = &e.detail {
        parts.push(detail.clone());
    }
    if let Some(error) = &e.error {
        parts.push(error.clone());
    }
    parts.join(" · ")
}

/// `GET /ui/queues/{queue}/events`: the queue's events from now, as the API's stream, for a
/// visitor with a session (the page's script follows it).
pub async fn stream(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path(name): axum::extract::Path<String>,
) -> Response {
    let opened = match app.queue(&name) {
        Ok(q) => {
            let filter = EventFilter::new();
            crate::api::events::open_stream(&app, &q, EventStart::Now, filter, session.token).await
        }
        Err(e) => Err(e),
    };
    opened.unwrap_or_else(|e| e.into_response())
}
