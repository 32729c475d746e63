//! Admin routes: queues and their stats, pause and resume, dead letters (list, requeue,
//! purge).

use axum::extract::State;

use super::query::Query;

use super::path::Path;
use axum::response::IntoResponse;
use axum::Json;
use delayq::{DeadLetter, Stats};
use serde::{Deserialize, Serialize};

use super::access::{AdminRole, Authorized};
use super::body::{parse, JsonBody};
use super::wire::{errors_out, DurationArg, EncryptedOut, ErrorOut, PayloadOut};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;
use utoipa::{IntoParams, ToSchema};

/// A queue's counts, added up over its partitions.
#[derive(Serialize, ToSchema)]
struct StatsOut {
    name: String,
    delayed: u64,
    ready: u64,
    in_flight: u64,
    dead: u64,
    oldest_ready_lag_ms: u64,
    /// Of `in_flight`, held past the end of their lease (their consumer died or stalled):
    /// the next claim takes them back. Not 0 with no consumer running means stuck work.
    overdue: u64,
    /// How long ago the oldest overdue lease ended (0: none).
    oldest_overdue_ms: u64,
    /// How many partitions the queue is spread over.
    partitions: u16,
    /// Paused: no consumer is given a message until it is resumed.
    paused: bool,
    /// How long a caller id stays reserved after its message is gone (0: only while it
    /// exists).
    idempotency_window_ms: u64,
    /// The queue's rate limit, if it has one.
    rate_limit: Option<RateLimitArg>,
    /// The format of the queue's data (the oldest of its partitions'; `GET
    /// .../format` shows each).
    data_format: u32,
    /// Groups with messages pending or in flight.
    groups: u64,
    /// At most this many messages of one group in flight at once (null: no limit).
    group_concurrency: Option<u32>,
    /// Each group's rate limit, unless it has its own (null: none).
    group_rate_limit: Option<RateLimitArg>,
    /// A message without a deadline of its own is never delivered more than this long
    /// after it is due (null: no limit).
    default_ttl_ms: Option<u64>,
    /// What an expired message becomes: "dead_letter" or "drop".
    on_expire: &'static str,
    /// Sends due further out than this are refused (null: no limit of the queue's own).
    max_delay_ms: Option<u64>,
    /// Final records of ended messages kept (`GET .../messages/{id}` answers them as
    /// "completed").
    completed: u64,
    /// How long and how many final records the queue keeps (null: none).
    retain_completed: Option<RetentionOut>,
    /// Events kept (`GET .../events`).
    events: u64,
    /// About how many events each partition keeps (null: the queue records none).
    events_max: Option<u64>,
    /// Payloads sent are encrypted at rest (AES-256-GCM, with the newest key of the
    /// server's `--keys-file`).
    encryption: bool,
}

/// How long, and how many per partition, final records a queue keeps.
#[derive(Serialize, ToSchema)]
struct RetentionOut {
    keep_for_ms: u64,
    max: u32,
}

/// Keep the final record of each message that ends (acked, cancelled, expired, dead).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RetentionArg {
    /// How long each is kept (`"7d"` or ms; 1 s to 366 days).
    keep_for: DurationArg,
    /// At most this many per partition, the oldest dropped first (1 to 10,000,000).
    #[schema(minimum = 1, maximum = 10000000)]
    max: u32,
}

impl StatsOut {
    async fn of(queue: &delayq::Queue) -> delayq::Result<Self> {
        let s: Stats = queue.stats().await?;
        Ok(StatsOut {
            name: queue.name().to_string(),
            delayed: s.delayed,
            ready: s.ready,
            in_flight: s.in_flight,
            dead: s.dead,
            oldest_ready_lag_ms: s.oldest_ready_lag_ms,
            overdue: s.overdue,
            oldest_overdue_ms: s.oldest_overdue_ms,
            partitions: queue.partitions().await?,
            paused: s.paused,
            idempotency_window_ms: s.idempotency_window.as_millis() as u64,
            rate_limit: s.rate_limit.map(RateLimitArg::from),
            data_format: s.data_format,
            groups: s.groups,
            group_concurrency: s.group_concurrency,
            group_rate_limit: s.group_rate_limit.map(RateLimitArg::from),
            default_ttl_ms: s.default_ttl.map(|d| d.as_millis() as u64),
            on_expire: if s.drop_expired {
                "drop"
            } else {
                "dead_letter"
            },
            max_delay_ms: s.max_delay.map(|d| d.as_millis() as u64),
            completed: s.completed,
            retain_completed: s.retain_completed.map(|r| RetentionOut {
                keep_for_ms: r.keep_for.as_millis() as u64,
                max: r.max,
            }),
            events: s.events,
            events_max: s.events_kept,
            encryption: s.encrypted,
        })
    }
}

#[derive(Serialize, ToSchema)]
struct QueuesOut {
    queues: Vec<StatsOut>,
}

/// `GET /v1/queues`: every queue with its counts (a scoped token's queues only).
#[utoipa::path(get, path = "/v1/queues", tag = "admin", responses((status = 200, body = QueuesOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn queues(
    State(state): State<AppState>,
    auth: Authorized<AdminRole>,
) -> ApiResult<impl IntoResponse> {
    let mut out = Vec::new();
    // A scoped token sees its queues only.
    for name in state.dq().queues().await? {
        if auth.may_use(name.as_str()) {
            out.push(StatsOut::of(&state.queue(name.as_str())?).await?);
        }
    }
    Ok(Json(QueuesOut { queues: out }))
}

/// `GET /v1/queues/{queue}`: one queue's counts (all zero for a queue never used).
#[utoipa::path(get, path = "/v1/queues/{queue}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = StatsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn stats(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    Ok(Json(StatsOut::of(&state.queue(&queue)?).await?))
}

/// How to create a queue.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateQueue {
    /// Partitions to spread the queue over (1 to 256): hash tags that a Redis Cluster places
    /// on different masters. Fixed for the queue's life.
    partitions: u16,
}

/// `PUT /v1/queues/{queue}`: creates a queue with a partition count. The same count again is
/// fine; another count, or a queue already in use with one partition, is refused (400).
#[utoipa::path(put, path = "/v1/queues/{queue}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = CreateQueue, responses((status = 200, body = StatsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let create: CreateQueue = parse(&body)?;
    let q = state.dq().create_queue(&queue, create.partitions).await?;
    Ok(Json(StatsOut::of(&q).await?))
}

/// `POST /v1/queues/{queue}/pause`: no consumer is given a message until the queue is
/// resumed; sends are still accepted and messages in flight settle as usual. Answers the
/// queue's stats.
#[utoipa::path(post, path = "/v1/queues/{queue}/pause", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = StatsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn pause(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    // Takes no body, but refuses a form's like every JSON route (`api/body.rs`).
    _: JsonBody,
) -> ApiResult<impl IntoResponse> {
    set_paused(&state, &queue, true).await
}

/// `POST /v1/queues/{queue}/resume`: consumers are given messages again at once. Answers
/// the queue's stats.
#[utoipa::path(post, path = "/v1/queues/{queue}/resume", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = StatsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn resume(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    // Takes no body, but refuses a form's like every JSON route (`api/body.rs`).
    _: JsonBody,
) -> ApiResult<impl IntoResponse> {
    set_paused(&state, &queue, false).await
}

async fn set_paused(state: &AppState, queue: &str, paused: bool) -> ApiResult<Json<StatsOut>> {
    let q = state.queue(queue)?;
    match paused {
        true => q.pause().await?,
        false => q.resume().await?,
    }
    Ok(Json(StatsOut::of(&q).await?))
}

/// Settings of a queue to change; those left out stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct QueueSettings {
    /// How long a caller id stays reserved after its message is acked, cancelled or purged,
    /// so a late retry of its send is still a duplicate (`"1h"` or ms; 0 turns it off; at
    /// most 366 days).
    idempotency_window: Option<DurationArg>,
    /// At most this many deliveries a second across every consumer; `null` lifts the limit.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<RateLimitArg>)]
    rate_limit: Option<Option<RateLimitArg>>,
    /// At most this many messages of one group in flight at once (1: each group in order);
    /// `null` lifts the limit.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000000)]
    group_concurrency: Option<Option<u32>>,
    /// At most this many deliveries a second of each group (a token bucket per group), unless
    /// a group has its own; `null` lifts it.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<RateLimitArg>)]
    group_rate_limit: Option<Option<RateLimitArg>>,
    /// A message without a deadline of its own (`ttl`, `expires_at`) is never delivered more
    /// than this long after it is due (`"5m"` or ms); `null` lifts it.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<DurationArg>)]
    default_ttl: Option<Option<DurationArg>>,
    /// What an expired message becomes: `"dead_letter"` (the default: a dead letter with the
    /// error `expired`) or `"drop"` (gone).
    #[schema(value_type = Option<String>, pattern = "^(dead_letter|drop)$")]
    on_expire: Option<String>,
    /// Sends due further out than this from now are refused with 400 `invalid_schedule`
    /// (`"30d"` or ms); `null` lifts it.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<DurationArg>)]
    max_delay: Option<Option<DurationArg>>,
    /// Keep the final record of each message that ends, for `GET .../messages/{id}` and the
    /// list of completed messages; `null` stops it and drops the records kept.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<RetentionArg>)]
    retain_completed: Option<Option<RetentionArg>>,
    /// Record an event for each change of a message's state, for `GET .../events`; `null`
    /// stops it and drops the events kept.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<EventsArg>)]
    events: Option<Option<EventsArg>>,
    /// Encrypt the payloads sent from now on (AES-256-GCM, with the newest key of the
    /// server's `--keys-file`; 503 `no_encryption_key` without one), or send them in clear
    /// again (`false`); either way what is stored stays as it is (`delayq keys rotate` seals
    /// it). Needs the queue's data in format 7 (`POST .../format/upgrade`).
    encryption: Option<bool>,
}

/// Record events: each partition keeps about `max` of them, the oldest dropped first.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArg {
    /// About how many stream entries each partition keeps: an entry is one event, or up to
    /// 100 sends, deliveries or acks of one call (1 to 10,000,000; default 20,000).
    #[schema(minimum = 1, maximum = 10000000)]
    max: Option<u64>,
}

/// A rate limit: deliveries per second, and how many at once after a quiet spell.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RateLimitArg {
    #[schema(minimum = 1)]
    per_second: u32,
    /// Default 1: evenly paced.
    #[schema(minimum = 1)]
    burst: Option<u32>,
}

impl From<delayq::RateLimit> for RateLimitArg {
    fn from(l: delayq::RateLimit) -> Self {
        RateLimitArg {
            per_second: l.per_second,
            burst: Some(l.burst),
        }
    }
}

impl From<RateLimitArg> for delayq::RateLimit {
    fn from(l: RateLimitArg) -> Self {
        delayq::RateLimit {
            per_second: l.per_second,
            burst: l.burst.unwrap_or(1),
        }
    }
}

/// Tells a field given as `null` (`Some(None)`) from one left out (`None`).
pub(super) fn present_or_null<'de, D, T>(d: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d).map(Some)
}

/// `PATCH /v1/queues/{queue}`: changes a queue's settings. Answers the queue's stats.
#[utoipa::path(patch, path = "/v1/queues/{queue}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = QueueSettings, responses((status = 200, body = StatsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn configure(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let settings: QueueSettings = parse(&body)?;
    let q = state.queue(&queue)?;
    let mut changes = Vec::new();
    if let Some(window) = settings.idempotency_window {
        let window = window.get("idempotency_window")?;
        changes.push(delayq::Setting::IdempotencyWindow(window));
    }
    if let Some(limit) = settings.rate_limit {
        changes.push(delayq::Setting::RateLimit(limit.map(Into::into)));
    }
    if let Some(n) = settings.group_concurrency {
        changes.push(delayq::Setting::GroupConcurrency(n));
    }
    if let Some(limit) = settings.group_rate_limit {
        changes.push(delayq::Setting::GroupRateLimit(limit.map(Into::into)));
    }
    if let Some(ttl) = settings.default_ttl {
        let ttl = ttl.map(|t| t.get("default_ttl")).transpose()?;
        changes.push(delayq::Setting::DefaultTtl(ttl));
    }
    if let Some(max) = settings.max_delay {
        let max = max.map(|d| d.get("max_delay")).transpose()?;
        changes.push(delayq::Setting::MaxDelay(max));
    }
    if let Some(retain) = settings.retain_completed {
        let retention = match retain {
            Some(r) => Some(delayq::Retention {
                keep_for: r.keep_for.get("retain_completed.keep_for")?,
                max: r.max,
            }),
            None => None,
        };
        changes.push(delayq::Setting::RetainCompleted(retention));
    }
    if let Some(events) = settings.events {
        let max = events.map(|e| e.max.unwrap_or(delayq::DEFAULT_EVENTS_KEPT));
        changes.push(delayq::Setting::Events(max));
    }
    if let Some(action) = settings.on_expire {
        let action = match action.as_str() {
            "dead_letter" => delayq::OnExpire::DeadLetter,
            "drop" => delayq::OnExpire::Drop,
            other => {
                return Err(ApiError::bad_request(
                    "invalid_option",
                    format!("on_expire is \"dead_letter\" or \"drop\", not {other:?}"),
                ))
            }
        };
        changes.push(delayq::Setting::OnExpire(action));
    }
    if let Some(on) = settings.encryption {
        changes.push(delayq::Setting::Encryption(on));
    }
    // All or nothing: a refused setting leaves the others unchanged too.
    q.configure(&changes).await?;
    Ok(Json(StatsOut::of(&q).await?))
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct Page {
    offset: Option<u64>,
    limit: Option<usize>,
}

#[derive(Serialize, ToSchema)]
struct DeadOut {
    id: String,
    died_at_ms: u64,
    attempts: u32,
    max_attempts: u32,
    /// 0 (lowest) to 9 (highest); a requeue keeps it.
    priority: u8,
    last_error: Option<String>,
    /// The last few failed attempts, oldest first.
    errors: Vec<ErrorOut>,
    #[serde(flatten)]
    payload: PayloadOut,
    /// The payload is stored encrypted (the queue's `encryption`).
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted: Option<EncryptedOut>,
}

impl From<DeadLetter> for DeadOut {
    fn from(d: DeadLetter) -> Self {
        DeadOut {
            id: d.id,
            died_at_ms: d.died_at_ms,
            attempts: d.attempts,
            max_attempts: d.max_attempts,
            priority: d.priority,
            last_error: d.last_error,
            errors: errors_out(d.errors),
            encrypted: EncryptedOut::of(d.sealed.as_ref()),
            payload: PayloadOut::new(d.payload, d.kind),
        }
    }
}

#[derive(Serialize, ToSchema)]
struct DeadListOut {
    total: u64,
    dead_letters: Vec<DeadOut>,
}

/// `GET /v1/queues/{queue}/dead?offset=0&limit=100`: oldest death first.
#[utoipa::path(get, path = "/v1/queues/{queue}/dead", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), Page), responses((status = 200, body = DeadListOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn dead_list(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    Query(page): Query<Page>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let limit = page.limit.unwrap_or(100);
    state.limits().check_batch(limit)?;
    let dead = q.dead_letters();
    let list = dead.list(page.offset.unwrap_or(0), limit).await?;
    Ok(Json(DeadListOut {
        total: dead.count().await?,
        dead_letters: list.into_iter().map(DeadOut::from).collect(),
    }))
}

/// Which dead letters: one by id, or all.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Which {
    #[schema(pattern = "^[A-Za-z0-9._:@/-]{1,128}$")]
    id: Option<String>,
    all: Option<bool>,
}

#[derive(Serialize, ToSchema)]
struct CountOut {
    count: u64,
}

/// `POST /v1/queues/{queue}/requeue` with `{"id"}` or `{"all": true}`: dead letters back to
/// ready, attempts reset. 404 for an id that is not a dead letter.
#[utoipa::path(post, path = "/v1/queues/{queue}/requeue", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = Which, responses((status = 200, body = CountOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn requeue(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    one_or_all(&state, &queue, &body, Action::Requeue).await
}

/// `POST /v1/queues/{queue}/purge` with `{"id"}` or `{"all": true}`: dead letters deleted.
#[utoipa::path(post, path = "/v1/queues/{queue}/purge", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = Which, responses((status = 200, body = CountOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn purge(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    one_or_all(&state, &queue, &body, Action::Purge).await
}

#[derive(Clone, Copy)]
enum Action {
    Requeue,
    Purge,
}

async fn one_or_all(
    state: &AppState,
    queue: &str,
    body: &[u8],
    action: Action,
) -> ApiResult<axum::response::Response> {
    let q = state.queue(queue)?;
    let dead = q.dead_letters();
    let which = parse::<Which>(body)?;
    // What the audit log names: the dead letter, or all of them.
    let named = which.id.clone().unwrap_or_else(|| "(all)".to_owned());
    let count = match (which, action) {
        (
            Which {
                id: Some(id),
                all: None | Some(false),
            },
            _,
        ) => {
            let found = match action {
                Action::Requeue => dead.requeue(&id).await?,
                Action::Purge => dead.purge(&id).await?,
            };
            if !found {
                return Err(ApiError::not_found(format!("no dead letter {id}")));
            }
            1
        }
        (
            Which {
                id: None,
                all: Some(true),
            },
            Action::Requeue,
        ) => dead.requeue_all().await?,
        (
            Which {
                id: None,
                all: Some(true),
            },
            Action::Purge,
        ) => dead.purge_all().await?,
        _ => return Err(which_error()),
    };
    let mut response = Json(CountOut { count }).into_response();
    response.extensions_mut().insert(crate::audit::Detail {
        ids: vec![named],
        ..Default::default()
    });
    Ok(response)
}

fn which_error() -> ApiError {
    ApiError::bad_request("invalid_option", "give id (one dead letter) or all: true")
}
