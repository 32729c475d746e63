//! The dashboard's bulk cancel: every delayed (or ready) message of a queue, or those whose
//! payload or id contains a text (what the page's search found), after a page that says
//! which and asks. One click cancels at most [`MOST_PER_CLICK`], a page of the state (or a
//! search step) at a time, each message its own atomic cancel: one that a consumer took
//! meanwhile is left alone and counted so.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use delayq::{CancelOutcome, Cursor, Queue, State as MessageState};
use maud::html;

use super::layout;
use super::session::Session;
use super::text::queue_path;
use crate::state::AppState;

/// Most messages one click cancels: a bounded request; the page says when more are left.
pub const MOST_PER_CLICK: u64 = 10_000;

/// Messages listed (or, searching, looked at per partition) per step.
const STEP: usize = 500;

/// What a bulk cancel did.
pub struct Cancelled {
    pub cancelled: u64,
    /// Taken by a consumer (or dead) meanwhile: left alone.
    pub left_alone: u64,
    /// It stopped at [`MOST_PER_CLICK`] with more to go.
    pub more: bool,
}

/// The state a bulk cancel may take: delayed or ready.
pub fn cancellable(state: Option<&str>) -> Result<MessageState, String> {
    match state {
        Some("delayed") => Ok(MessageState::Delayed),
        Some("ready") => Ok(MessageState::Ready),
        other => Err(format!(
            "only delayed or ready messages can be cancelled, not {:?}",
            other.unwrap_or("")
        )),
    }
}

/// Cancels `queue`'s messages in `state` (those whose payload or id contains `contains`, if
/// given), at most [`MOST_PER_CLICK`].
pub async fn cancel_matching(
    queue: &Queue,
    state: MessageState,
    contains: Option<&str>,
) -> delayq::Result<Cancelled> {
    let mut done = Cancelled {
        cancelled: 0,
        left_alone: 0,
        more: false,
    };
    let mut cursor: Option<Cursor> = None;
    loop {
        let page = match contains {
            Some(text) => {
                queue
                    .search(state, text.as_bytes(), cursor.as_ref(), STEP)
                    .await?
            }
            None => queue.list(state, cursor.as_ref(), STEP).await?,
        };
        for message in &page.messages {
            if done.cancelled >= MOST_PER_CLICK {
                done.more = true;
                return Ok(done);
            }
            match queue.cancel(&message.id).await? {
                CancelOutcome::Cancelled(_) => done.cancelled += 1,
                _ => done.left_alone += 1,
            }
        }
        match page.next {
            Some(next) => cursor = Some(next),
            None => return Ok(done),
        }
    }
}

/// The text of what a bulk cancel did.
pub fn done_text(done: &Cancelled) -> String {
    let mut text = format!("Cancelled {} messages.", done.cancelled);
    if done.left_alone > 0 {
        text.push_str(&format!(
            " {} were taken meanwhile and left alone.",
            done.left_alone
        ));
    }
    if done.more {
        text.push_str(&format!(
            " Stopped at {MOST_PER_CLICK}: cancel again for the rest."
        ));
    }
    text
}

/// `GET /ui/queues/{queue}/confirm?action=cancel_all&state=delayed[&contains=TEXT]`: says
/// which messages go, and asks.
pub async fn confirm(
    app: &AppState,
    session: &Session,
    name: &str,
    state: Option<&str>,
    contains: Option<&str>,
) -> Response {
    let state = match cancellable(state) {
        Ok(state) => state,
        Err(why) => return (StatusCode::BAD_REQUEST, why).into_response(),
    };
    let count = match app.queue(name) {
        Ok(q) => match q.stats().await {
            Ok(s) if state == MessageState::Delayed => s.delayed,
            Ok(s) => s.ready,
            Err(e) => return (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
        },
        Err(e) => return (StatusCode::BAD_REQUEST, e.message().to_owned()).into_response(),
    };
    let contains = contains.filter(|t| !t.is_empty());
    let base = queue_path(name);
    let which = state.as_str();
    let body = html! {
        h1 { "Cancel " (which) " messages?" }
        p #confirm-text {
            @match contains {
                Some(text) => {
                    "Cancel the " (which) " messages of queue " strong { (name) }
                    " whose payload or id contains " code { (text) } " (of " strong { (count) } " " (which) ")?"
                }
                None => { "Cancel all " strong { (count) } " " (which) " messages of queue " strong { (name) } "?" }
            }
            " They are gone for good; at most " (MOST_PER_CLICK) " per click."
        }
        div.row {
            form.inline method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                input type="hidden" name="state" value=(which);
                @if let Some(text) = contains { input type="hidden" name="contains" value=(text); }
                button.danger #confirm type="submit" name="action" value="cancel_all" {
                    "Cancel them"
                }
            }
            a href=(format!("{base}?state={which}")) { "Keep them" }
        }
    };
    layout::page("Confirm", Some(session), false, body).into_response()
}
