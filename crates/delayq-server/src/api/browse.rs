//! `GET /v1/queues/{queue}/messages?state=...`: one state's messages a page at a time, and
//! a search of their payloads in bounded steps (the dashboard's lists and search).
//!
//! Any valid token may read: the dashboard shows these lists to every role. A list shows a
//! preview of each payload; the whole message is `GET /v1/queues/{queue}/messages/{id}`.

use axum::extract::State;

use super::query::Query;
use axum::response::IntoResponse;
use axum::Json;
use delayq::{Cursor, MessageInfo, PayloadKind};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::access::{AnyRole, Authorized};
use super::path::Path;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::shapes::{EncryptedOut, MessageFields};
use crate::state::AppState;

/// Bytes of a payload shown in a list.
pub const PREVIEW_BYTES: usize = 200;

/// Messages per page when the request does not say.
const DEFAULT_PAGE: usize = 50;

/// Messages a search step looks at per partition when the request does not say.
const DEFAULT_SEARCH_STEP: usize = 500;

/// The query of a list, or of a search step.
#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListQuery {
    /// `delayed`, `ready`, `in_flight`, `dead` or `completed`.
    state: String,
    /// Where to go on from: a previous answer's `next`.
    cursor: Option<String>,
    /// A list: messages per page (1-1000, default 50). A search: messages looked at per
    /// partition in this step (1-1000, default 500).
    limit: Option<usize>,
    /// Search: only messages whose payload or id contains this text.
    contains: Option<String>,
}

/// A message as a list shows it.
#[derive(Serialize, ToSchema)]
pub struct SummaryOut {
    id: String,
    state: &'static str,
    due_ms: u64,
    attempts: u32,
    max_attempts: u32,
    #[serde(flatten)]
    fields: MessageFields,
    last_error: Option<String>,
    lease_deadline_ms: Option<u64>,
    died_at_ms: Option<u64>,
    /// Completed: how it ended ("acked", "cancelled", "expired", "dead").
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    /// Completed: when it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at_ms: Option<u64>,
    /// `json` or `bytes`.
    payload_kind: &'static str,
    /// The payload's size in bytes.
    payload_bytes: usize,
    /// Its first 200 bytes as text (bytes that are not UTF-8 shown as U+FFFD); empty for a
    /// payload stored encrypted, which a listing neither shows nor searches.
    payload_preview: String,
    /// The payload is stored encrypted (the queue's `encryption`): never opened here.
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted: Option<EncryptedOut>,
}

impl From<MessageInfo> for SummaryOut {
    fn from(mut m: MessageInfo) -> Self {
        let (payload_bytes, body) = listed_body(&m);
        let payload_preview = preview(body);
        SummaryOut {
            fields: MessageFields::of_message(&mut m),
            state: m.state.as_str(),
            due_ms: m.due_ms,
            attempts: m.attempts,
            max_attempts: m.max_attempts,
            last_error: m.last_error,
            lease_deadline_ms: m.lease_deadline_ms,
            died_at_ms: m.died_at_ms,
            outcome: m.completion.as_ref().map(|c| c.outcome.as_str()),
            finished_at_ms: m.completion.as_ref().map(|c| c.finished_at_ms),
            payload_kind: if m.kind == PayloadKind::Json {
                "json"
            } else {
                "bytes"
            },
            payload_bytes,
            payload_preview,
            encrypted: EncryptedOut::of(m.sealed.as_ref()),
            id: m.id,
        }
    }
}

/// A listed message's body (its push envelope opened) as far as the list carries it, and the
/// whole body's size. A list carries only a payload's first bytes
/// ([`delayq::BROWSE_PAYLOAD_BYTES`]), so a message whose envelope alone is longer shows no
/// preview, and its size counts the envelope.
pub fn listed_body(m: &MessageInfo) -> (usize, &[u8]) {
    let (destination, body) = crate::push_envelope::open(&m.payload);
    if destination.is_none() && crate::push_envelope::looks_sealed(&m.payload) {
        return (m.payload_len, &[]);
    }
    let envelope = m.payload.len() - body.len();
    (m.payload_len.saturating_sub(envelope), body)
}

/// The first [`PREVIEW_BYTES`] of `body` as text, never cut inside a character.
pub fn preview(body: &[u8]) -> String {
    let mut end = body.len().min(PREVIEW_BYTES);
    if let Err(e) = std::str::from_utf8(&body[..end]) {
        if e.error_len().is_none() {
            // Only the cut is inside a character: stop before it.
            end = e.valid_up_to();
        }
    }
    String::from_utf8_lossy(&body[..end]).into_owned()
}

#[derive(Serialize, ToSchema)]
struct ListOut {
    messages: Vec<SummaryOut>,
    /// How many messages this step looked at (a search's progress).
    scanned: u64,
    /// Where the next page or step starts; `null` at the end.
    next: Option<String>,
}

/// Every state a message can be listed in.
pub const STATES: [delayq::State; 5] = [
    delayq::State::Delayed,
    delayq::State::Ready,
    delayq::State::InFlight,
    delayq::State::Dead,
    delayq::State::Completed,
];

/// The state named `text`, as [`delayq::State::as_str`] names it.
pub fn state_named(text: &str) -> Result<delayq::State, String> {
    STATES
        .into_iter()
        .find(|s| s.as_str() == text)
        .ok_or_else(|| {
            format!("state is delayed, ready, in_flight, dead or completed, not {text:?}")
        })
}

/// The state named in a query.
pub fn parse_state(text: &str) -> ApiResult<delayq::State> {
    state_named(text).map_err(|why| ApiError::bad_request("invalid_option", why))
}

/// `GET /v1/queues/{queue}/messages?state=delayed&limit=50&cursor=...`: a page of one state,
/// in its order (delayed and ready by due time, in flight by lease deadline, dead by death,
/// completed the latest ended first).
/// With `contains=text` it is one step of a search: the messages among the next `limit` of
/// each partition that contain the text; go on with `next` until it is `null`.
#[utoipa::path(get, path = "/v1/queues/{queue}/messages", tag = "browse", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ListQuery), responses((status = 200, body = ListOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _: Authorized<AnyRole>,
    Path(queue): Path<String>,
    Query(query): Query<ListQuery>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let which = parse_state(&query.state)?;
    let cursor = query.cursor.as_deref().map(Cursor::parse).transpose()?;
    let page = match query.contains.as_deref() {
        Some(needle) => {
            let step = query.limit.unwrap_or(DEFAULT_SEARCH_STEP);
            q.search(which, needle.as_bytes(), cursor.as_ref(), step)
                .await?
        }
        None => {
            q.list(which, cursor.as_ref(), query.limit.unwrap_or(DEFAULT_PAGE))
                .await?
        }
    };
    Ok(Json(ListOut {
        messages: page.messages.into_iter().map(SummaryOut::from).collect(),
        scanned: page.scanned,
        next: page.next.map(|c| c.to_string()),
    }))
}
