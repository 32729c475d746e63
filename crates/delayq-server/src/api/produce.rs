//! Producer routes: send one (JSON or a raw body), send a batch, get, cancel, reschedule.

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use delayq::{CancelOutcome, Message, MessageInfo, PayloadKind, Sent};
use serde::{Deserialize, Serialize};

use super::wire::{parse, Body, MessageOptions, PayloadOut, ScheduleArgs, SendBody};
use crate::auth::Role;
use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

/// A send's result. A duplicate caller id is not an error: it names the existing message.
#[derive(Debug, Serialize)]
pub struct SentOut {
    id: String,
    due_ms: Option<u64>,
    duplicate: bool,
}

impl From<Sent> for SentOut {
    fn from(s: Sent) -> Self {
        SentOut {
            id: s.id,
            due_ms: s.due_ms,
            duplicate: s.duplicate,
        }
    }
}

/// `POST /v1/queues/{queue}/messages`: a JSON body (`SendBody`), or any other content type
/// as the payload bytes with the options in the query string.
pub async fn send(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    Query(query): Query<MessageOptions>,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<impl IntoResponse> {
    state.authorize(&headers, Role::Send)?;
    let q = state.queue(&queue)?;
    let (payload, options) = if is_json(&headers) {
        if query.id.is_some() || query.delay.is_some() || query.deliver_at.is_some() {
            return Err(ApiError::bad_request(
                "invalid_option",
                "a JSON send takes its options in the body, not the query string",
            ));
        }
        parse::<SendBody>(&body)?.into_message(state.limits())?
    } else {
        let options = query.send_options(state.limits())?.kind(PayloadKind::Bytes);
        (body.to_vec(), options)
    };
    let sent = q.send(&payload, &options).await?;
    let status = if sent.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(SentOut::from(sent))))
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BatchBody {
    messages: Vec<SendBody>,
}

#[derive(Serialize)]
struct BatchOut {
    results: Vec<SentOut>,
}

/// `POST /v1/queues/{queue}/batch`: up to the batch limit, all or nothing: one invalid
/// message and nothing is written.
pub async fn send_batch(
    State(state): State<AppState>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<impl IntoResponse> {
    state.authorize(&headers, Role::Send)?;
    let q = state.queue(&queue)?;
    let batch: BatchBody = parse(&body)?;
    state.limits().check_batch(batch.messages.len())?;
    let mut messages = Vec::with_capacity(batch.messages.len());
    for (i, m) in batch.messages.into_iter().enumerate() {
        let (payload, options) = m.into_message(state.limits()).map_err(|e| e.at(i))?;
        messages.push(Message::new(payload, options));
    }
    let sent = q.send_batch(&messages).await?;
    Ok(Json(BatchOut {
        results: sent.into_iter().map(SentOut::from).collect(),
    }))
}

/// A message as `get` answers it.
#[derive(Serialize)]
struct MessageOut {
    id: String,
    state: &'static str,
    due_ms: u64,
    attempts: u32,
    max_attempts: u32,
    last_error: Option<String>,
    #[serde(flatten)]
    payload: PayloadOut,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_deadline_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    died_at_ms: Option<u64>,
}

impl From<MessageInfo> for MessageOut {
    fn from(m: MessageInfo) -> Self {
        MessageOut {
            id: m.id,
            state: m.state.as_str(),
            due_ms: m.due_ms,
            attempts: m.attempts,
            max_attempts: m.max_attempts,
            last_error: m.last_error,
            payload: PayloadOut::new(m.payload, m.kind),
            lease_deadline_ms: m.lease_deadline_ms,
            died_at_ms: m.died_at_ms,
        }
    }
}

/// `GET /v1/queues/{queue}/messages/{id}`.
pub async fn get(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<impl IntoResponse> {
    state.authorize(&headers, Role::Send)?;
    let q = state.queue(&queue)?;
    match q.get(&id).await? {
        Some(info) => Ok(Json(MessageOut::from(info))),
        None => Err(ApiError::not_found(format!("message {id} not found"))),
    }
}

#[derive(Serialize)]
struct CancelOut {
    cancelled: bool,
    state: &'static str,
}

/// `DELETE /v1/queues/{queue}/messages/{id}`: removes a delayed or ready message; 409 for
/// one in flight or dead (left alone), 404 for none.
pub async fn cancel(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> ApiResult<impl IntoResponse> {
    state.authorize(&headers, Role::Send)?;
    let q = state.queue(&queue)?;
    match q.cancel(&id).await? {
        CancelOutcome::Cancelled(s) => Ok(Json(CancelOut {
            cancelled: true,
            state: s.as_str(),
        })),
        CancelOutcome::NotCancelled(s) => Err(delayq::Error::WrongState { id, state: s }.into()),
        CancelOutcome::NotFound => Err(ApiError::not_found(format!("message {id} not found"))),
        _ => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "unknown cancel outcome",
        )),
    }
}

#[derive(Serialize)]
struct RescheduledOut {
    id: String,
    due_ms: u64,
}

/// `POST /v1/queues/{queue}/messages/{id}/reschedule` with `{"delay"}` or `{"deliver_at"}`.
pub async fn reschedule(
    State(state): State<AppState>,
    Path((queue, id)): Path<(String, String)>,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<impl IntoResponse> {
    state.authorize(&headers, Role::Send)?;
    let q = state.queue(&queue)?;
    let schedule = parse::<ScheduleArgs>(&body)?.schedule(state.limits())?;
    let due_ms = q.reschedule(&id, schedule).await?;
    Ok(Json(RescheduledOut { id, due_ms }))
}
