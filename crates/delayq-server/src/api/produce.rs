//! Producer routes: send one (JSON or a raw body), send a batch, get, cancel, reschedule.

use axum::extract::State;

use super::query::Query;

use super::path::Path;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use delayq::{CancelOutcome, MessageInfo, PayloadKind, Sent};
use serde::Serialize;

use super::access::{Authorized, SendRole};
use super::batch_reader::read_batch;
use super::body::{parse, Body, JsonBody, JsonPayload};
use super::sized_json::SizedJson;
use super::wire::{
    errors_out, EncryptedOut, ErrorOut, PayloadOut, RawPayload, ScheduleArgs, SendBody, SendQuery,
};
use crate::error::ErrorBody;
use crate::error::{ApiError, ApiResult};
use crate::shapes::MessageFields;
use crate::state::AppState;
use utoipa::ToSchema;

/// A send's result. A duplicate caller id is not an error: it names the existing message.
#[derive(Debug, Serialize, ToSchema)]
pub struct SentOut {
    id: String,
    due_ms: Option<u64>,
    duplicate: bool,
    /// An upsert (`on_duplicate` replace or debounce) that wrote its message in place of
    /// one with its id: the state that one was in ("delayed" or "ready": it is gone;
    /// "in_flight": it runs on, superseded).
    #[serde(skip_serializing_if = "Option::is_none")]
    replaced: Option<&'static str>,
}

impl From<Sent> for SentOut {
    fn from(s: Sent) -> Self {
        SentOut {
            id: s.id,
            due_ms: s.due_ms,
            duplicate: s.duplicate,
            replaced: s.replaced.map(|state| state.as_str()),
        }
    }
}

/// `POST /v1/queues/{queue}/messages`: a JSON body (`SendBody`), or any other content type
/// as the payload bytes with the options in the query string.
#[utoipa::path(post, path = "/v1/queues/{queue}/messages", tag = "produce",
    params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$"), SendQuery),
    request_body(content(
        (SendBody = "application/json"),
        (RawPayload = "application/octet-stream"),
    ), description = "JSON: the message; any other type: the payload bytes, options in the query"),
    responses((status = 201, body = SentOut, description = "Sent"),
        (status = 200, body = SentOut, description = "A message with this caller id exists"),
        (status = 413, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn send(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path(queue): Path<String>,
    Query(query): Query<SendQuery>,
    headers: HeaderMap,
    Body(body): Body,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let traceparent = traceparent_header(&headers)?;
    let (payload, options) = if super::body::is_json(&headers) {
        if !query.is_empty() {
            return Err(ApiError::bad_request(
                "invalid_option",
                "a JSON send takes its options in the body, not the query string",
            ));
        }
        let mut body = parse::<SendBody>(&body)?;
        body.traceparent = body.traceparent.or(traceparent);
        let url = super::push::message_url(&body);
        let message = body.into_message(state.limits())?;
        super::push::check_message_urls(&state, &q, url.as_slice()).await?;
        message
    } else {
        let mut options = query
            .options()?
            .send_options(state.limits())?
            .kind(PayloadKind::Bytes);
        if let Some(traceparent) = traceparent {
            options = options.traceparent(traceparent);
        }
        (crate::api::wire::sealed(body.to_vec(), None)?, options)
    };
    let sent = q.send(&payload, &options).await?;
    let status = if sent.duplicate {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(SentOut::from(sent))))
}

/// The request's W3C `traceparent` header, which a message carries unless it says otherwise
/// (checked at send, as the body's field is).
fn traceparent_header(headers: &HeaderMap) -> ApiResult<Option<String>> {
    headers
        .get("traceparent")
        .map(|v| {
            v.to_str().map(str::to_owned).map_err(|_| {
                ApiError::bad_request("invalid_option", "the traceparent header is not text")
            })
        })
        .transpose()
}

/// A batch, as the OpenAPI document shows it (the route reads it as a stream:
/// `batch_reader.rs`).
#[derive(ToSchema)]
#[allow(dead_code)]
struct BatchBody {
    messages: Vec<SendBody>,
}

#[derive(Serialize, ToSchema)]
struct BatchOut {
    results: Vec<SentOut>,
}

/// `POST /v1/queues/{queue}/batch`: up to the batch limit, all or nothing: one invalid
/// message and nothing is written.
#[utoipa::path(post, path = "/v1/queues/{queue}/batch", tag = "produce", params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    request_body = BatchBody,
    responses((status = 200, body = BatchOut), (status = 413, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn send_batch(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path(queue): Path<String>,
    headers: HeaderMap,
    JsonPayload(body): JsonPayload,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let traceparent = traceparent_header(&headers)?;
    let batch = read_batch(&body, state.limits(), traceparent.as_deref())?;
    super::push::check_message_urls(&state, &q, &batch.urls).await?;
    let sent = q.send_batch(&batch.messages).await?;
    // `{"id":"...","due_ms":...,"duplicate":false},` is under 80 bytes for a generated id.
    let capacity = sent.iter().map(|s| 64 + s.id.len()).sum::<usize>() + 16;
    Ok(SizedJson {
        value: BatchOut {
            results: sent.into_iter().map(SentOut::from).collect(),
        },
        capacity,
    })
}

/// A message as `get` answers it.
#[derive(Serialize, ToSchema)]
struct MessageOut {
    id: String,
    state: &'static str,
    due_ms: u64,
    attempts: u32,
    max_attempts: u32,
    #[serde(flatten)]
    fields: MessageFields,
    /// Debounced (`on_duplicate` debounce): the latest its due time may be pushed to, ms
    /// since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    debounce_until_ms: Option<u64>,
    /// The W3C trace context it carries, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    last_error: Option<String>,
    /// The last few failed attempts, oldest first.
    errors: Vec<ErrorOut>,
    /// The payload (`payload` or `payload_base64`); none for a completed message.
    #[serde(flatten)]
    payload: Option<PayloadOut>,
    /// False for a completed message: a final record keeps no payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_kept: Option<bool>,
    /// The payload is stored encrypted (the queue's `encryption`).
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted: Option<EncryptedOut>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_deadline_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    died_at_ms: Option<u64>,
    /// Completed (the queue retains final records): how it ended, "acked", "cancelled",
    /// "expired" or "dead".
    #[serde(skip_serializing_if = "Option::is_none")]
    outcome: Option<&'static str>,
    /// Completed: when it was sent, if known (sent while the queue retained).
    #[serde(skip_serializing_if = "Option::is_none")]
    sent_at_ms: Option<u64>,
    /// Completed: when it was first delivered, if it was (and it is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    first_delivered_at_ms: Option<u64>,
    /// Completed: when it ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    finished_at_ms: Option<u64>,
}

impl From<MessageInfo> for MessageOut {
    fn from(mut m: MessageInfo) -> Self {
        let kept = m.completion.is_none();
        MessageOut {
            fields: MessageFields::of_message(&mut m),
            id: m.id,
            state: m.state.as_str(),
            due_ms: m.due_ms,
            attempts: m.attempts,
            max_attempts: m.max_attempts,
            debounce_until_ms: m.debounce_until_ms,
            traceparent: m.traceparent,
            last_error: m.last_error,
            errors: errors_out(m.errors),
            encrypted: EncryptedOut::of(m.sealed.as_ref()),
            payload: kept.then(|| PayloadOut::new(m.payload, m.kind)),
            payload_kept: (!kept).then_some(false),
            lease_deadline_ms: m.lease_deadline_ms,
            died_at_ms: m.died_at_ms,
            outcome: m.completion.as_ref().map(|c| c.outcome.as_str()),
            sent_at_ms: m.completion.as_ref().and_then(|c| c.sent_at_ms),
            first_delivered_at_ms: m.completion.as_ref().and_then(|c| c.first_delivered_at_ms),
            finished_at_ms: m.completion.as_ref().map(|c| c.finished_at_ms),
        }
    }
}

/// `GET /v1/queues/{queue}/messages/{id}`.
#[utoipa::path(get, path = "/v1/queues/{queue}/messages/{id}", tag = "produce", params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("id" = String, Path, description = "Message id", pattern = "^[A-Za-z0-9._:@/-]{1,128}$")),
    responses((status = 200, body = MessageOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path((queue, id)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    match q.get(&id).await? {
        Some(info) => Ok(Json(MessageOut::from(info))),
        None => Err(ApiError::not_found(format!("message {id} not found"))),
    }
}

#[derive(Serialize, ToSchema)]
struct CancelOut {
    cancelled: bool,
    state: &'static str,
}

/// `DELETE /v1/queues/{queue}/messages/{id}`: removes a delayed or ready message; 409 for
/// one in flight or dead (left alone), 404 for none.
#[utoipa::path(delete, path = "/v1/queues/{queue}/messages/{id}", tag = "produce", params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("id" = String, Path, description = "Message id", pattern = "^[A-Za-z0-9._:@/-]{1,128}$")),
    responses((status = 200, body = CancelOut), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "In flight or dead: left alone"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path((queue, id)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
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

#[derive(Serialize, ToSchema)]
struct RescheduledOut {
    id: String,
    due_ms: u64,
}

/// `POST /v1/queues/{queue}/messages/{id}/reschedule` with `{"delay"}` or `{"deliver_at"}`.
#[utoipa::path(post, path = "/v1/queues/{queue}/messages/{id}/reschedule", tag = "produce", params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("id" = String, Path, description = "Message id", pattern = "^[A-Za-z0-9._:@/-]{1,128}$")),
    request_body = ScheduleArgs,
    responses((status = 200, body = RescheduledOut), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn reschedule(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path((queue, id)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let schedule = parse::<ScheduleArgs>(&body)?.schedule(state.limits())?;
    let due_ms = q.reschedule(&id, schedule).await?;
    Ok(Json(RescheduledOut { id, due_ms }))
}
