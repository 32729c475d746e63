//! Consumer routes: receive (with long-poll), ack, nack, extend, release. A delivery is
//! named by its receipt, an opaque string.
//!
//! Long-polls cost no Redis connection each: every request's consumer shares the queue's one
//! wake-up subscription (the library shares it per client), and claims go through the one
//! ordinary connection.

use std::time::Duration;

use axum::extract::State;

use super::path::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq::{Delivery, NackOutcome, Next, QueueSet, Receipt, ReceiveOptions};
use serde::{Deserialize, Serialize};

use super::access::{Authorized, ConsumeRole};
use super::body::{parse, JsonBody, JsonPayload};
use super::sized_json::SizedJson;
use super::wire::{DurationArg, PayloadOut};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::shapes::MessageFields;
use crate::state::AppState;
use utoipa::ToSchema;

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ReceiveBody {
    /// Most messages (default 1).
    #[schema(minimum = 1, maximum = 1000)]
    max: Option<usize>,
    /// Lease of each (default 30 s).
    lease: Option<DurationArg>,
    /// Longest wait for something to come due (default 0: answer at once).
    wait: Option<DurationArg>,
    /// Receipts of deliveries of this queue to ack, as `ack` does (most 1000): a client
    /// that finished them saves a request, and Redis a call where they go with this
    /// receive's claim (one at once, or the one that takes the next message within 20 ms;
    /// the rest are acked on their own then). `acked` says how each went.
    #[schema(max_items = 1000, value_type = Option<Vec<String>>)]
    acks: Option<Vec<String>>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ReceiveManyBody {
    /// Queues in strict priority order, the first highest (or give `weights`).
    #[schema(min_items = 1, max_items = 64)]
    queues: Option<Vec<String>>,
    /// Queues served in proportion to their weights, 1 to 1000 (or give `queues`).
    weights: Option<std::collections::BTreeMap<String, u32>>,
    /// Most messages in all (default 1).
    #[schema(minimum = 1, maximum = 1000)]
    max: Option<usize>,
    /// Lease of each (default 30 s).
    lease: Option<DurationArg>,
    /// Longest wait for something to come due on any of the queues (default 0).
    wait: Option<DurationArg>,
}

#[derive(Serialize, ToSchema)]
struct DeliveryOut {
    /// The queue it came from: settle it there.
    queue: String,
    receipt: String,
    id: String,
    attempt: u32,
    #[serde(flatten)]
    fields: MessageFields,
    due_ms: u64,
    lease_deadline_ms: u64,
    /// The sender's limit on the time spent on it, if it gave one.
    #[serde(skip_serializing_if = "Option::is_none")]
    handler_timeout_ms: Option<u64>,
    /// The W3C trace context it was sent with, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    traceparent: Option<String>,
    #[serde(flatten)]
    payload: PayloadOut,
}

impl From<Delivery> for DeliveryOut {
    fn from(mut d: Delivery) -> Self {
        DeliveryOut {
            fields: MessageFields::of_delivery(&mut d),
            queue: d.queue.to_string(),
            receipt: d.receipt().to_string(),
            attempt: d.attempt,
            due_ms: d.due_ms,
            lease_deadline_ms: d.lease_deadline_ms,
            handler_timeout_ms: d.handler_timeout.map(|t| t.as_millis() as u64),
            traceparent: d.traceparent,
            payload: PayloadOut::new(d.payload, d.kind),
            id: d.id,
        }
    }
}

#[derive(Serialize, ToSchema)]
struct ReceiveOut {
    deliveries: Vec<DeliveryOut>,
    /// Per receipt in `acks`, in order: whether it was acked (`ok: false`: its lease was
    /// lost, or it was acked before). Only when `acks` were given.
    #[serde(skip_serializing_if = "Option::is_none")]
    acked: Option<Vec<Settled>>,
}

/// `POST /v1/queues/{queue}/receive`: `{"max", "lease", "wait", "acks"}`, acking `acks` on
/// the way (`Consumer::ack_then_receive_until`). Answers as soon as
/// something is claimed, or empty when `wait` runs out or the server shuts down.
#[utoipa::path(post, path = "/v1/queues/{queue}/receive", tag = "consume", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = ReceiveBody,
    responses((status = 200, body = ReceiveOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn receive(
    State(state): State<AppState>,
    _: Authorized<ConsumeRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let req: ReceiveBody = parse(&body)?;
    let options = receive_options(&state, req.max, req.lease.as_ref(), req.wait.as_ref())?;
    let acks = match req.acks {
        Some(texts) => {
            state.limits().check_batch(texts.len())?;
            let receipts = texts
                .iter()
                .map(|t| t.parse::<Receipt>().map_err(ApiError::from))
                .collect::<ApiResult<Vec<_>>>()?;
            Some(receipts)
        }
        None => None,
    };
    deliver(&state, QueueSet::single(q), &options, acks).await
}

/// `POST /v1/receive`: one receive over several queues, `{"queues": [...]}` in strict
/// order or `{"weights": {"queue": weight, ...}}`, with `max`, `lease` and `wait` as for one
/// queue. Waits on all of them at once; each delivery names its queue.
#[utoipa::path(post, path = "/v1/receive", tag = "consume", request_body = ReceiveManyBody,
    responses((status = 200, body = ReceiveOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn receive_many(
    State(state): State<AppState>,
    auth: Authorized<ConsumeRole>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let req: ReceiveManyBody = parse(&body)?;
    // Each queue within the token's scope, checked before its name (as for one queue's path).
    let queue = |n: &str| match auth.may_use(n) {
        true => state.queue(n),
        false => Err(crate::auth::out_of_scope()),
    };
    let set = match (req.queues, req.weights) {
        (Some(names), None) => QueueSet::strict(
            names
                .iter()
                .map(|n| queue(n))
                .collect::<ApiResult<Vec<_>>>()?,
        )?,
        (None, Some(weights)) => QueueSet::weighted(
            weights
                .iter()
                .map(|(n, w)| Ok((queue(n)?, *w)))
                .collect::<ApiResult<Vec<_>>>()?,
        )?,
        _ => {
            return Err(ApiError::bad_request(
                "invalid_option",
                "give either queues (strict order) or weights, not both",
            ))
        }
    };
    let options = receive_options(&state, req.max, req.lease.as_ref(), req.wait.as_ref())?;
    deliver(&state, set, &options, None).await
}

/// Receive options from a request, within the server's limits.
fn receive_options(
    state: &AppState,
    max: Option<usize>,
    lease: Option<&DurationArg>,
    wait: Option<&DurationArg>,
) -> ApiResult<ReceiveOptions> {
    let limits = state.limits();
    let max = max.unwrap_or(1);
    limits.check_batch(max)?;
    let lease = match lease {
        Some(l) => l.get("lease")?,
        None => Duration::from_secs(30),
    };
    limits.check_lease(lease)?;
    let wait = match wait {
        Some(w) => w.get("wait")?,
        None => Duration::ZERO,
    };
    limits.check_wait(wait)?;
    Ok(ReceiveOptions { max, lease, wait })
}

/// One receive of `set`, first acking `acks` (receipts of its one queue) if given.
async fn deliver(
    state: &AppState,
    set: QueueSet,
    options: &ReceiveOptions,
    acks: Option<Vec<Receipt>>,
) -> ApiResult<SizedJson<ReceiveOut>> {
    let mut consumer = set.consumer_for_one_receive().await?;
    let received = consumer
        .ack_then_receive_until(
            acks.as_deref().unwrap_or_default(),
            options,
            state.shutdown_started(),
        )
        .await;
    // This request's claim caused these deaths; nobody else will report them: a push
    // queue's get their failure callbacks from here.
    for dead in consumer.take_dead_lettered() {
        tracing::warn!(queue = %dead.queue, id = %dead.id, error = %dead.error, "message dead-lettered by a claim");
        if let Some(callbacks) = state.callbacks() {
            callbacks.report(&dead);
        }
    }
    let (acked, deliveries) = received?;
    // Each delivery's fields besides its id and payload take about 250 bytes; a bytes
    // payload grows by a third in base64. An ack's result, about 40 and its receipt.
    let capacity = deliveries
        .iter()
        .map(|d| 256 + d.id.len() + d.payload.len() * 4 / 3)
        .sum::<usize>()
        + acks
            .iter()
            .flatten()
            .map(|r| 64 + r.id().len())
            .sum::<usize>()
        + 32;
    let acked = acks.map(|receipts| {
        receipts
            .iter()
            .zip(acked.into_iter().chain(std::iter::repeat(false)))
            .map(|(r, ok)| Settled {
                receipt: r.to_string(),
                ok,
                lease_deadline_ms: None,
            })
            .collect()
    });
    Ok(SizedJson {
        value: ReceiveOut {
            deliveries: deliveries.into_iter().map(DeliveryOut::from).collect(),
            acked,
        },
        capacity,
    })
}

/// One receipt (`{"receipt": ...}`: the answer is about it alone, 409 when its lease was
/// lost) or many (`{"receipts": [...]}`: one result each).
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Receipts {
    #[schema(pattern = "^[0-9a-f]{24}[egEG][A-Za-z0-9._:@/-]{1,128}$")]
    receipt: Option<String>,
    receipts: Option<Vec<String>>,
    /// Extend only: the new lease from now.
    lease: Option<DurationArg>,
}

impl Receipts {
    /// The receipts, and whether a single one was given.
    fn parse(self, state: &AppState) -> ApiResult<(Vec<Receipt>, bool)> {
        let (texts, single) = match (self.receipt, self.receipts) {
            (Some(one), None) => (vec![one], true),
            (None, Some(many)) => (many, false),
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_receipt",
                    "give receipt (one) or receipts (a list)",
                ))
            }
        };
        state.limits().check_batch(texts.len())?;
        let receipts = texts
            .iter()
            .map(|t| t.parse::<Receipt>().map_err(ApiError::from))
            .collect::<ApiResult<Vec<_>>>()?;
        Ok((receipts, single))
    }
}

#[derive(Serialize, ToSchema)]
struct SettledOut {
    results: Vec<Settled>,
}

#[derive(Serialize, ToSchema)]
struct Settled {
    receipt: String,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_deadline_ms: Option<u64>,
}

/// The answer to a settle call: per receipt, or for a single one 204 / 409.
fn settled(receipts: &[Receipt], oks: &[Option<u64>], single: bool) -> ApiResult<Response> {
    if single {
        return match oks.first() {
            Some(Some(0)) => Ok(StatusCode::NO_CONTENT.into_response()),
            Some(Some(deadline)) => {
                Ok(Json(serde_json::json!({ "lease_deadline_ms": deadline })).into_response())
            }
            _ => Err(delayq::Error::LeaseLost {
                id: receipts
                    .first()
                    .map(|r| r.id().to_owned())
                    .unwrap_or_default(),
            }
            .into()),
        };
    }
    // `{"receipt":"<25 + id>","ok":true,"lease_deadline_ms":...},`
    let capacity = receipts.iter().map(|r| 80 + r.id().len()).sum::<usize>() + 16;
    let results = receipts
        .iter()
        .zip(oks)
        .map(|(r, ok)| Settled {
            receipt: r.to_string(),
            ok: ok.is_some(),
            lease_deadline_ms: ok.filter(|d| *d > 0),
        })
        .collect();
    Ok(SizedJson {
        value: SettledOut { results },
        capacity,
    }
    .into_response())
}

/// Per receipt: `Some(0)` settled, `None` lease lost.
fn as_settled(flags: Vec<bool>) -> Vec<Option<u64>> {
    flags.into_iter().map(|ok| ok.then_some(0)).collect()
}

/// `POST /v1/queues/{queue}/ack`.
#[utoipa::path(post, path = "/v1/queues/{queue}/ack", tag = "consume", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = Receipts,
    responses((status = 200, body = SettledOut, description = "Many receipts: a result each"), (status = 204, description = "One receipt: settled"), (status = 409, body = ErrorBody, description = "One receipt: its lease was lost"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn ack(
    State(state): State<AppState>,
    _: Authorized<ConsumeRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let q = state.queue(&queue)?;
    let (receipts, single) = parse::<Receipts>(&body)?.parse(&state)?;
    let acked = q.ack_receipts(&receipts).await?;
    settled(&receipts, &as_settled(acked), single)
}

/// `POST /v1/queues/{queue}/release`: hand deliveries back, ready now, attempt not counted.
#[utoipa::path(post, path = "/v1/queues/{queue}/release", tag = "consume", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = Receipts,
    responses((status = 200, body = SettledOut, description = "Many receipts: a result each"), (status = 204, description = "One receipt: settled"), (status = 409, body = ErrorBody, description = "One receipt: its lease was lost"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn release(
    State(state): State<AppState>,
    _: Authorized<ConsumeRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let q = state.queue(&queue)?;
    let (receipts, single) = parse::<Receipts>(&body)?.parse(&state)?;
    let released = q.release_receipts(&receipts).await?;
    settled(&receipts, &as_settled(released), single)
}

/// `POST /v1/queues/{queue}/extend` with `"lease"` (default 30 s).
#[utoipa::path(post, path = "/v1/queues/{queue}/extend", tag = "consume", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = Receipts,
    responses((status = 200, body = SettledOut, description = "Many receipts: a result each"), (status = 204, description = "One receipt: settled"), (status = 409, body = ErrorBody, description = "One receipt: its lease was lost"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn extend(
    State(state): State<AppState>,
    _: Authorized<ConsumeRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<Response> {
    let q = state.queue(&queue)?;
    let req: Receipts = parse(&body)?;
    let lease = match &req.lease {
        Some(l) => l.get("lease")?,
        None => Duration::from_secs(30),
    };
    state.limits().check_lease(lease)?;
    let (receipts, single) = req.parse(&state)?;
    let deadlines = q.extend_receipts(&receipts, lease).await?;
    settled(&receipts, &deadlines, single)
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct NackBody {
    #[schema(pattern = "^[0-9a-f]{24}[egEG][A-Za-z0-9._:@/-]{1,128}$")]
    receipt: String,
    /// What went wrong (kept as the message's last error).
    error: Option<String>,
    /// Retry after this long instead of by the message's backoff.
    retry_after: Option<DurationArg>,
    /// A dead letter now, whatever attempts are left (a permanent failure).
    dead: Option<bool>,
    /// The payload of the next attempts, as JSON (the message keeps its kind: use this for
    /// a message sent as JSON).
    #[serde(default, deserialize_with = "super::wire::present")]
    #[schema(value_type = Option<serde_json::Value>)]
    payload: Option<Box<serde_json::value::RawValue>>,
    /// The payload of the next attempts, as base64 bytes (for a message sent as bytes).
    payload_base64: Option<String>,
    /// Added to the attempts allowed (negative: fewer).
    extra_attempts: Option<i32>,
}

#[derive(Serialize, ToSchema)]
struct NackOut {
    /// "retry", "dead", "expired" (its retry would start after its deadline), or
    /// "superseded" (a newer message took its caller id while it was in flight: it ends
    /// here, neither retried nor a dead letter).
    outcome: &'static str,
}

/// `POST /v1/queues/{queue}/nack`: a failed attempt; retried by backoff (or after
/// `retry_after`), dead after the last attempt, or dead now with `"dead": true`.
#[utoipa::path(post, path = "/v1/queues/{queue}/nack", tag = "consume", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = NackBody,
    responses((status = 200, body = NackOut), (status = 409, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn nack(
    State(state): State<AppState>,
    _: Authorized<ConsumeRole>,
    Path(queue): Path<String>,
    JsonPayload(body): JsonPayload,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let req: NackBody = parse(&body)?;
    let receipt: Receipt = req.receipt.parse()?;
    let next = match (&req.retry_after, req.dead.unwrap_or(false)) {
        (Some(_), true) => {
            return Err(ApiError::bad_request(
                "invalid_option",
                "give retry_after or dead, not both",
            ))
        }
        (Some(d), false) => {
            let d = d.get("retry_after")?;
            state.limits().check_delay(d)?;
            Next::After(d)
        }
        (None, true) => Next::Dead,
        (None, false) => Next::Backoff,
    };
    let mut amend = delayq::Amend::default().extra_attempts(req.extra_attempts.unwrap_or(0));
    // The message keeps the kind it was sent with, whichever form the new payload takes.
    if let Some((payload, _kind)) = super::wire::payload_of(req.payload, req.payload_base64)? {
        // Stored as a send's payload is: one that could be mistaken for a push envelope goes
        // in an empty one, so a consumer cannot give the message a push destination.
        amend = amend.payload(super::wire::sealed(payload, None)?);
    }
    let error = req.error.as_deref().unwrap_or("failed");
    let outcome = match q.fail_receipt(&receipt, error, next, &amend).await? {
        NackOutcome::Retry => "retry",
        NackOutcome::Dead => "dead",
        NackOutcome::Expired => "expired",
        NackOutcome::Superseded => "superseded",
        _ => "settled",
    };
    Ok(Json(NackOut { outcome }))
}
