//! One message: every field, its payload shown as it is (pretty JSON, text or hex), its error
//! history, and the actions its state allows.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq::{MessageInfo, PayloadKind, State as MessageState};
use maud::{html, Markup};
use serde::Deserialize;

use super::layout;
use super::session::Session;
use super::text::{queue_path, segment, utc};
use super::visitor::Visitor;
use crate::state::AppState;

/// Most payload bytes shown; the rest is counted, not shown.
const SHOWN_BYTES: usize = 64 * 1024;

#[derive(Deserialize, Default)]
pub struct MessageQuery {
    done: Option<String>,
}

/// `GET /ui/queues/{queue}/messages/{id}`.
pub async fn page(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path((name, id)): axum::extract::Path<(String, String)>,
    Query(query): Query<MessageQuery>,
) -> Response {
    let found = match app.queue(&name) {
        Ok(q) => match tokio::join!(q.get(&id), q.timeline(&id)) {
            (Ok(m), Ok(timeline)) => Ok((m, timeline)),
            (Err(e), _) | (_, Err(e)) => Err(e.to_string()),
        },
        Err(e) => Err(e.message().to_owned()),
    };
    let back = queue_path(&name);
    let (status, body) = match found {
        Ok((Some(m), timeline)) => (
            StatusCode::OK,
            html! {
                (render(&session, &name, &m, query.done.as_deref()))
                (super::event_feed::timeline(&timeline))
            },
        ),
        Ok((None, timeline)) => (
            StatusCode::NOT_FOUND,
            html! {
                h1 { "Message " (id) }
                (layout::notice(query.done.as_deref()))
                p { "No such message in " a href=(back) { (name) } ": it was acked, cancelled or purged, or never sent." }
                // Its events outlive it, while the queue keeps them.
                (super::event_feed::timeline(&timeline))
            },
        ),
        Err(e) => (
            StatusCode::BAD_REQUEST,
            html! { p.notice.error role="alert" { (e) } },
        ),
    };
    (status, layout::page(&id, Some(&session), false, body)).into_response()
}

fn render(session: &Session, queue: &str, m: &MessageInfo, done: Option<&str>) -> Markup {
    let base = queue_path(queue);
    let act = format!("{base}/messages/{}/act", segment(&m.id));
    let (destination, body) = crate::push_envelope::open(&m.payload);
    html! {
        p { a href=(format!("{base}?state={}", m.state.as_str())) { "← " (queue) } }
        h1 { "Message " code { (m.id) } }
        (layout::notice(done))
        dl.fields #fields {
            dt { "State" } dd #state { (m.state.as_str()) }
            dt { "Due" } dd { (utc(m.due_ms)) }
            dt { "Attempts" } dd { (m.attempts) " of " (m.max_attempts) }
            @if m.completion.is_none() { dt { "Priority" } dd { (m.priority) } }
            @if let Some(g) = &m.group { dt { "Group" } dd { (g) } }
            @if let Some(at) = m.expires_at_ms { dt { "Expires" } dd #expires { (utc(at)) } }
            @if let Some(at) = m.debounce_until_ms { dt { "Debounced until" } dd #debounce-until { (utc(at)) } }
            @if let Some(trace) = m.traceparent.as_deref().and_then(trace_id) {
                dt { "Trace" } dd #trace { code { (trace) } }
            }
            @if let Some(lease) = m.lease_deadline_ms { dt { "Lease until" } dd { (utc(lease)) } }
            @if let Some(died) = m.died_at_ms { dt { "Died" } dd { (utc(died)) } }
            @if let Some(done) = &m.completion {
                dt { "Outcome" } dd #outcome { (done.outcome.as_str()) }
                dt { "Sent" } dd { (done.sent_at_ms.map_or("unknown".into(), utc)) }
                dt { "First delivered" } dd { (done.first_delivered_at_ms.map_or("–".into(), utc)) }
                dt { "Ended" } dd #finished { (utc(done.finished_at_ms)) }
            }
            @if let Some(d) = destination {
                @if let Some(url) = &d.url {
                    dt { "Pushed to" }
                    dd { (session.url_shown(url)) }
                }
            }
            @if m.completion.is_none() {
                dt { "Payload" } dd { (body.len()) " bytes, " (kind_name(m.kind, body)) }
            }
            @if let Some(sealed) = &m.sealed {
                dt { "Encrypted" } dd #encrypted { (encryption_shown(sealed)) }
            }
        }
        @if m.completion.is_none() { pre #payload { (show_payload(m.kind, body)) } }
        @if !m.errors.is_empty() {
            h2 { "Errors" }
            div.scroll { table #errors {
                thead { tr { th.num { "Attempt" } th { "At" } th { "Error" } } }
                tbody {
                    @for e in &m.errors {
                        tr { td.num { (e.attempt) } td { (if e.at_ms > 0 { utc(e.at_ms) } else { "–".into() }) } td.preview { (e.error) } }
                    }
                }
            } }
        }
        @if session.can_act() {
            h2 { "Actions" }
            @match m.state {
                MessageState::Delayed | MessageState::Ready => {
                    div.row {
                        @if m.state == MessageState::Delayed {
                            form.inline method="post" action=(act) {
                                (layout::csrf(session))
                                button #deliver-now type="submit" name="action" value="deliver_now" { "Deliver now" }
                            }
                        }
                        form.inline method="post" action=(act) {
                            (layout::csrf(session))
                            button.danger #cancel type="submit" name="action" value="cancel" { "Cancel" }
                        }
                    }
                    form.row method="post" action=(act) {
                        (layout::csrf(session))
                        label for="at" { "Reschedule to (UTC)" }
                        input #at type="datetime-local" name="at" step="1" required;
                        button #reschedule type="submit" name="action" value="reschedule" { "Reschedule" }
                    }
                }
                MessageState::Dead => {
                    div.row {
                        form.inline method="post" action=(act) {
                            (layout::csrf(session))
                            button.primary #requeue type="submit" name="action" value="requeue" { "Requeue" }
                        }
                        form.inline method="post" action=(act) {
                            (layout::csrf(session))
                            button.danger #purge type="submit" name="action" value="purge" { "Purge" }
                        }
                    }
                }
                MessageState::Completed => {
                    p.muted { "It ended; this is its final record, kept by the queue's retention." }
                }
                _ => {
                    p.muted { "Held by a consumer until its lease ends: nothing to do here." }
                }
            }
        }
    }
}

/// The trace id of a `traceparent` (what a tracing UI searches by).
fn trace_id(traceparent: &str) -> Option<&str> {
    traceparent.split('-').nth(1)
}

fn kind_name(kind: PayloadKind, body: &[u8]) -> &'static str {
    match kind {
        PayloadKind::Json => "JSON",
        _ if std::str::from_utf8(body).is_ok() => "text",
        _ => "binary",
    }
}

/// What the page says of a payload stored encrypted.
fn encryption_shown(sealed: &delayq::Sealed) -> String {
    let key = sealed.key().unwrap_or("?");
    match sealed {
        delayq::Sealed::Opened { .. } => format!("at rest, with key {key}; shown opened"),
        delayq::Sealed::Undecryptable(e) => format!("at rest; not shown: {e}"),
        _ => format!("at rest, with key {key}"),
    }
}

/// The payload as a person reads it: JSON indented, text as it is, anything else as hex.
fn show_payload(kind: PayloadKind, body: &[u8]) -> String {
    let shown = &body[..body.len().min(SHOWN_BYTES)];
    let cut = if body.len() > SHOWN_BYTES {
        format!("\n… {} more bytes", body.len() - SHOWN_BYTES)
    } else {
        String::new()
    };
    if kind == PayloadKind::Json {
        if let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) {
            if let Ok(pretty) = serde_json::to_string_pretty(&value) {
                return pretty;
            }
        }
    }
    match std::str::from_utf8(shown) {
        Ok(text) => format!("{text}{cut}"),
        Err(_) => {
            let mut out = String::new();
            for (i, chunk) in shown.chunks(16).enumerate() {
                let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
                out.push_str(&format!("{:08x}  {}\n", i * 16, hex.join(" ")));
            }
            out + &cut
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_show_as_json_text_or_hex() {
        assert_eq!(
            show_payload(PayloadKind::Json, br#"{"a":1}"#),
            "{\n  \"a\": 1\n}"
        );
        assert_eq!(show_payload(PayloadKind::Bytes, b"plain"), "plain");
        assert_eq!(
            show_payload(PayloadKind::Bytes, &[0xff, 0x00, 0x41]),
            "00000000  ff 00 41\n"
        );
    }
}
