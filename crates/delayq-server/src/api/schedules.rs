//! Recurring schedule routes: create or replace, read, list (with next run times), pause and
//! resume, backfill, delete.
//! Every server runs a scheduler (`delayq serve`), so a schedule created here starts firing
//! without anything else to run.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use delayq::{Firing, MissedTicks, Overlap, Recurrence, ScheduleInfo};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use utoipa::ToSchema;

use super::access::{AdminRole, Authorized};
use super::body::{parse, JsonBody, JsonPayload};
use super::path::Path;
use super::wire::{
    present, required_payload, BackoffArg, DurationArg, EncryptedOut, MessageOptions, PayloadOut,
    TimeArg,
};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;

/// A schedule to create or replace: when it fires (`cron` or `every`), and the message each
/// tick becomes.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleBody {
    /// A cron expression: a crontab line `min hour day-of-month month day-of-week`
    /// (`30 9 * * MON-FRI`, at second 0), the same with a seconds field first
    /// (`0 30 9 * * MON-FRI`), or a nickname (`@daily`, `@hourly`).
    cron: Option<String>,
    /// The IANA time zone the cron expression is read in (default `UTC`), daylight saving
    /// changes included.
    time_zone: Option<String>,
    /// Or a fixed period (1 s to 366 days), on a grid from the Unix epoch: `every: "10m"`
    /// fires at :00, :10, :20...
    every: Option<DurationArg>,
    /// Ticks missed while no scheduler ran: `skip` (default), `once` (the latest), or
    /// `all:<n>` (the latest n).
    missed: Option<String>,
    /// A JSON payload.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<RawValue>>,
    /// A bytes payload, base64.
    payload_base64: Option<String>,
    /// Each message's priority, 0 to 9 (default 5).
    #[schema(minimum = 0, maximum = 9)]
    priority: Option<u64>,
    /// Each message's deliveries before the dead letters.
    #[schema(minimum = 1, maximum = 65535)]
    max_attempts: Option<u64>,
    /// Each message's retry policy.
    backoff: Option<BackoffArg>,
    /// How long a worker may spend on each message.
    handler_timeout: Option<DurationArg>,
    /// Each tick's message is due up to this long after its tick (1 ms to 24 h), by an
    /// offset every scheduler reckons the same (a hash of the name and the tick).
    jitter: Option<DurationArg>,
    /// `allow` (default): every tick fires; `skip`: a tick fires only once the last tick's
    /// message is no longer pending or in flight.
    #[schema(pattern = "^(allow|skip)$")]
    overlap: Option<String>,
}

/// A schedule, with its next run times.
#[derive(Serialize, ToSchema)]
struct ScheduleOut {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    time_zone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every_ms: Option<u64>,
    missed: String,
    priority: u8,
    max_attempts: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    handler_timeout_ms: Option<u64>,
    #[serde(flatten)]
    payload: PayloadOut,
    /// The payload is kept encrypted (the queue's `encryption`).
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted: Option<EncryptedOut>,
    /// When it was created or last replaced (Unix ms, Redis clock).
    created_ms: u64,
    /// The last tick sent as a message.
    last_tick_ms: Option<u64>,
    /// The next five ticks (Unix ms); while paused, those it would fire once resumed.
    next_ticks_ms: Vec<u64>,
    /// Paused: no tick fires until it is resumed.
    paused: bool,
    /// The jitter, if any: each message due up to this long after its tick.
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter_ms: Option<u64>,
    /// `allow` or `skip`.
    overlap: &'static str,
}

impl From<ScheduleInfo> for ScheduleOut {
    fn from(s: ScheduleInfo) -> Self {
        let cron = s.recurrence.as_cron();
        ScheduleOut {
            cron: cron.map(|(expr, _)| expr.to_owned()),
            time_zone: cron.map(|(_, tz)| tz.to_owned()),
            every_ms: s
                .recurrence
                .as_interval()
                .map(|(d, _)| d.as_millis() as u64),
            missed: s.missed.to_string(),
            priority: s.priority,
            max_attempts: s.max_attempts,
            handler_timeout_ms: s.handler_timeout.map(|t| t.as_millis() as u64),
            encrypted: EncryptedOut::of(s.sealed.as_ref()),
            payload: PayloadOut::new(s.payload, s.kind),
            created_ms: s.created_ms,
            last_tick_ms: s.last_tick_ms,
            next_ticks_ms: s.next_ticks_ms,
            paused: s.paused,
            jitter_ms: s.firing.jitter.map(|j| j.as_millis() as u64),
            overlap: s.firing.overlap.as_str(),
            name: s.name,
        }
    }
}

#[derive(Serialize, ToSchema)]
struct ScheduleList {
    schedules: Vec<ScheduleOut>,
}

#[derive(Serialize, ToSchema)]
struct Deleted {
    deleted: bool,
}

/// `GET /v1/queues/{queue}/schedules`: every schedule of the queue, by name.
#[utoipa::path(get, path = "/v1/queues/{queue}/schedules", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, body = ScheduleList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let schedules = q.schedules().list().await?;
    Ok(Json(ScheduleList {
        schedules: schedules.into_iter().map(ScheduleOut::from).collect(),
    }))
}

/// `PUT /v1/queues/{queue}/schedules/{name}`: creates the schedule, or replaces it (it goes on
/// from its last tick). Answers the schedule with its next run times.
#[utoipa::path(put, path = "/v1/queues/{queue}/schedules/{name}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("name" = String, Path, description = "Schedule name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = ScheduleBody,
    responses((status = 200, body = ScheduleOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn put(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, name)): Path<(String, String)>,
    JsonPayload(body): JsonPayload,
) -> ApiResult<impl IntoResponse> {
    let body: ScheduleBody = parse(&body)?;
    let q = state.queue(&queue)?;
    let recurrence = match (body.cron, body.every) {
        (Some(cron), None) => Recurrence::cron(&cron, body.time_zone.as_deref().unwrap_or("UTC"))?,
        (None, Some(every)) if body.time_zone.is_none() => {
            Recurrence::interval(every.get("every")?, 0)?
        }
        _ => {
            return Err(ApiError::bad_request(
                "invalid_schedule",
                "give cron (and optionally time_zone) or every, not both or neither",
            ))
        }
    };
    let missed = match body.missed.as_deref() {
        None => MissedTicks::Skip,
        Some(text) => text.parse()?,
    };
    let firing = Firing {
        jitter: body.jitter.map(|j| j.get("jitter")).transpose()?,
        overlap: match body.overlap.as_deref() {
            None => Overlap::Allow,
            Some(text) => text.parse()?,
        },
    };
    let (payload, kind) = required_payload(body.payload, body.payload_base64)?;
    let options = MessageOptions {
        max_attempts: body.max_attempts,
        backoff: body.backoff,
        priority: body.priority,
        handler_timeout: body.handler_timeout,
        ..MessageOptions::default()
    }
    .send_options(state.limits())?
    .kind(kind);
    let schedules = q.schedules();
    schedules
        .put_with(&name, recurrence, missed, firing, payload, &options)
        .await?;
    let info = schedules
        .get(&name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("schedule {name} was deleted meanwhile")))?;
    Ok(Json(ScheduleOut::from(info)))
}

/// `GET /v1/queues/{queue}/schedules/{name}`.
#[utoipa::path(get, path = "/v1/queues/{queue}/schedules/{name}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("name" = String, Path, description = "Schedule name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, body = ScheduleOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, name)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let info = q
        .schedules()
        .get(&name)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no schedule {name} in {queue}")))?;
    Ok(Json(ScheduleOut::from(info)))
}

/// `DELETE /v1/queues/{queue}/schedules/{name}`: a tick already sent ahead and not yet due is
/// cancelled with it.
#[utoipa::path(delete, path = "/v1/queues/{queue}/schedules/{name}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("name" = String, Path, description = "Schedule name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, body = Deleted), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, name)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    if !q.schedules().delete(&name).await? {
        return Err(ApiError::not_found(format!(
            "no schedule {name} in {queue}"
        )));
    }
    Ok(Json(Deleted { deleted: true }))
}

/// A schedule's state to change.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ScheduleStateIn {
    /// `true` pauses it (no tick fires); `false` resumes it, and its `missed` policy says
    /// which of the ticks it skipped fire now.
    paused: bool,
}

/// `PATCH /v1/queues/{queue}/schedules/{name}`: pauses or resumes the schedule.
#[utoipa::path(patch, path = "/v1/queues/{queue}/schedules/{name}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("name" = String, Path, description = "Schedule name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = ScheduleStateIn,
    responses((status = 200, body = ScheduleOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn set_state(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, name)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let change: ScheduleStateIn = parse(&body)?;
    let q = state.queue(&queue)?;
    let schedules = q.schedules();
    let found = match change.paused {
        true => schedules.pause(&name).await?,
        false => schedules.resume(&name).await?,
    };
    let info = match found {
        true => schedules.get(&name).await?,
        false => None,
    }
    .ok_or_else(|| ApiError::not_found(format!("no schedule {name} in {queue}")))?;
    Ok(Json(ScheduleOut::from(info)))
}

/// A past time range of a schedule's ticks to send if they never were.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BackfillIn {
    /// From this time (Unix ms or RFC 3339), inclusive.
    from: TimeArg,
    /// To this time, inclusive; at most now.
    to: TimeArg,
}

/// What a backfill did.
#[derive(Serialize, ToSchema)]
struct BackfillOut {
    /// Ticks sent now.
    sent: u32,
    /// Ticks in the range sent before (nothing written for them).
    already_sent: u32,
}

/// `POST /v1/queues/{queue}/schedules/{name}/backfill`: sends each tick from `from` to `to`
/// that was never sent (missed while no scheduler ran, skipped by the `missed` policy, or
/// while paused), due at once; a repeat sends nothing more. At most 1,000 ticks a call.
#[utoipa::path(post, path = "/v1/queues/{queue}/schedules/{name}/backfill", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("name" = String, Path, description = "Schedule name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = BackfillIn,
    responses((status = 200, body = BackfillOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn backfill(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, name)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let range: BackfillIn = parse(&body)?;
    let q = state.queue(&queue)?;
    let (from, to) = (range.from.unix_ms("from")?, range.to.unix_ms("to")?);
    let done = q
        .schedules()
        .backfill(&name, from, to)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no schedule {name} in {queue}")))?;
    Ok(Json(BackfillOut {
        sent: done.sent,
        already_sent: done.already_sent,
    }))
}
