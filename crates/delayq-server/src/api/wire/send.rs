//! A send as the API takes it: the JSON body, or the query string of a raw body, and the
//! message options both turn into.

use std::time::Duration;

use delayq::{Backoff, PayloadKind, SendOptions, MAX_PRIORITY};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use utoipa::{IntoParams, ToSchema};

use crate::error::{ApiError, ApiResult};
use crate::limits::Limits;

use super::args::{BackoffArg, DurationArg, ScheduleArgs, TimeArg};
use super::payload::decode_base64;
use crate::api::upsert_args::{IfInFlightArg, OnDuplicateArg, UpsertArgs};

/// One message to send, as JSON. Exactly one of `payload` (any JSON value, delivered back
/// as the same JSON) and `payload_base64` (bytes).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SendBody {
    /// A JSON payload.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<serde_json::Value>)]
    pub payload: Option<Box<RawValue>>,
    /// A bytes payload, base64 (standard alphabet, padded).
    pub payload_base64: Option<String>,
    /// Due this long after Redis receives the request.
    pub delay: Option<DurationArg>,
    /// Due at this time.
    pub deliver_at: Option<TimeArg>,
    /// The caller's id (makes the send idempotent).
    #[schema(pattern = "^[A-Za-z0-9._:@/-]{1,128}$")]
    pub id: Option<String>,
    /// Deliveries before it goes to the dead letters (default 5).
    #[schema(minimum = 1, maximum = 65535, default = 5)]
    pub max_attempts: Option<u64>,
    /// Retry policy (default: exponential from 1 s, doubling, at most 10 minutes, each delay
    /// shortened at random by up to 10 %).
    #[schema(default = json!({ "exponential": { "base": "1s", "cap": "10m", "factor": 2, "jitter_percent": 10 } }))]
    pub backoff: Option<BackoffArg>,
    /// 0 (lowest) to 9 (highest), default 5: among due messages, higher priorities are
    /// delivered first.
    #[schema(minimum = 0, maximum = 9)]
    pub priority: Option<u64>,
    /// Its group (a tenant, a customer, an order): claims serve the groups with due messages
    /// in turn, and the queue's `group_concurrency` bounds a group's messages in flight (1:
    /// in order). Needs the queue in data format 3.
    #[schema(pattern = "^[A-Za-z0-9._:@/-]{1,128}$")]
    pub group: Option<String>,
    /// Never delivered more than this long after it is due: a later claim expires it (a
    /// dead letter with the error `expired`, or dropped if the queue says so), and so does
    /// a retry that would start later. Needs the queue in data format 4.
    pub ttl: Option<DurationArg>,
    /// Never delivered at or after this time (after its due time); as `ttl`, not both.
    pub expires_at: Option<TimeArg>,
    /// With an `id`, when a message with that id exists: `keep` it (default; a duplicate),
    /// `replace` it, or `debounce` it (with `max_wait`).
    pub on_duplicate: Option<OnDuplicateArg>,
    /// A debounce is never due later than this after the first send it replaced in turn.
    pub max_wait: Option<DurationArg>,
    /// A replace or debounce of a message in flight: `send` a second message (default; the
    /// one in flight is superseded) or `refuse` (a duplicate).
    pub if_in_flight: Option<IfInFlightArg>,
    /// How long a worker may spend on it (in place of the worker's own timeout); delivered
    /// as `handler_timeout_ms`.
    pub handler_timeout: Option<DurationArg>,
    /// Answer only once this many replicas have the message (Redis `WAIT`); fewer in time is
    /// a 503 `not_replicated`, the message written all the same.
    pub replicas: Option<ReplicasArg>,
    /// On a queue delivered by push: this message's own URL and extra headers, in place of
    /// the target's.
    #[schema(value_type = Option<Object>)]
    pub push: Option<crate::push_envelope::Destination>,
    /// W3C trace context handed to whoever handles it (default: the request's
    /// `traceparent` header).
    pub traceparent: Option<String>,
}

/// How many replicas must have a send, and how long to wait for them.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplicasArg {
    /// Replicas of the master that took the send.
    pub count: u32,
    /// How long to wait for them (default 1 s).
    pub timeout: Option<DurationArg>,
}

/// Keeps a present `null` as a JSON payload instead of taking it for "absent".
pub(crate) fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// A payload given as `payload` (JSON) or `payload_base64` (bytes), if one was; both is a 400.
pub fn payload_of(
    json: Option<Box<RawValue>>,
    base64: Option<String>,
) -> ApiResult<Option<(Vec<u8>, PayloadKind)>> {
    match (json, base64) {
        (Some(json), None) => {
            // The parsed text itself, not a copy of it.
            let text: Box<str> = json.into();
            Ok(Some((
                text.into_boxed_bytes().into_vec(),
                PayloadKind::Json,
            )))
        }
        (None, Some(b64)) => Ok(Some((decode_base64(&b64)?, PayloadKind::Bytes))),
        (None, None) => Ok(None),
        (Some(_), Some(_)) => Err(ApiError::bad_request(
            "invalid_payload",
            "give payload (JSON) or payload_base64 (bytes), not both",
        )),
    }
}

/// The payload of a message that must have one: `payload` or `payload_base64`.
pub fn required_payload(
    json: Option<Box<RawValue>>,
    base64: Option<String>,
) -> ApiResult<(Vec<u8>, PayloadKind)> {
    payload_of(json, base64)?.ok_or_else(|| {
        ApiError::bad_request(
            "invalid_payload",
            "give exactly one of payload (JSON) and payload_base64 (bytes)",
        )
    })
}

impl SendBody {
    /// The payload bytes and the send options.
    pub fn into_message(self, limits: &Limits) -> ApiResult<(Vec<u8>, SendOptions)> {
        let (payload, kind) = required_payload(self.payload, self.payload_base64)?;
        let options = MessageOptions {
            delay: self.delay,
            deliver_at: self.deliver_at,
            id: self.id,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            priority: self.priority,
            group: self.group,
            ttl: self.ttl,
            expires_at: self.expires_at,
            upsert: UpsertArgs {
                on_duplicate: self.on_duplicate,
                max_wait: self.max_wait.map(|w| w.get("max_wait")).transpose()?,
                if_in_flight: self.if_in_flight,
            },
            handler_timeout: self.handler_timeout,
            replicas: self.replicas,
            traceparent: self.traceparent,
        }
        .send_options(limits)?
        .kind(kind);
        Ok((sealed(payload, self.push)?, options))
    }
}

/// The payload as stored: in an envelope with the message's own push destination if it has
/// one (`push_envelope.rs`), or if it could be mistaken for one.
pub fn sealed(
    payload: Vec<u8>,
    push: Option<crate::push_envelope::Destination>,
) -> ApiResult<Vec<u8>> {
    use crate::push_envelope as envelope;
    match push {
        Some(destination) => {
            crate::push::target::check_destination(&destination)
                .map_err(|e| ApiError::bad_request("invalid_option", e))?;
            Ok(envelope::seal(&destination, &payload))
        }
        None if envelope::looks_sealed(&payload) => {
            Ok(envelope::seal(&Default::default(), &payload))
        }
        None => Ok(payload),
    }
}

/// The options of a raw-body send, in its query string.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SendQuery {
    /// Due this long after Redis receives the request (with a unit: `15m`, `900000ms`).
    pub delay: Option<String>,
    /// Due at this time (RFC 3339).
    pub deliver_at: Option<String>,
    /// The caller's id.
    pub id: Option<String>,
    /// Deliveries before the dead letters (default 5).
    #[param(default = 5)]
    pub max_attempts: Option<u64>,
    /// 0 (lowest) to 9 (highest), default 5.
    pub priority: Option<u64>,
    /// Its group (a tenant, a customer, an order).
    pub group: Option<String>,
    /// Never delivered more than this long after it is due (`15m`).
    pub ttl: Option<String>,
    /// Never delivered at or after this time (RFC 3339).
    pub expires_at: Option<String>,
    /// With an `id`: `keep` (default), `replace` or `debounce` a message with that id.
    pub on_duplicate: Option<OnDuplicateArg>,
    /// A debounce's max wait (`30s`).
    pub max_wait: Option<String>,
    /// A replace or debounce of a message in flight: `send` (default) or `refuse`.
    pub if_in_flight: Option<IfInFlightArg>,
    /// How long a worker may spend on it (`30s`).
    pub handler_timeout: Option<String>,
}

impl SendQuery {
    /// True when any option is given.
    pub fn is_empty(&self) -> bool {
        self.delay.is_none()
            && self.deliver_at.is_none()
            && self.id.is_none()
            && self.max_attempts.is_none()
            && self.priority.is_none()
            && self.group.is_none()
            && self.ttl.is_none()
            && self.expires_at.is_none()
            && self.on_duplicate.is_none()
            && self.max_wait.is_none()
            && self.if_in_flight.is_none()
            && self.handler_timeout.is_none()
    }

    /// As the options of a JSON send.
    pub fn options(self) -> ApiResult<MessageOptions> {
        Ok(MessageOptions {
            delay: self.delay.map(DurationArg::Text),
            deliver_at: self.deliver_at.map(TimeArg::Text),
            id: self.id,
            max_attempts: self.max_attempts,
            backoff: None,
            priority: self.priority,
            group: self.group,
            ttl: self.ttl.map(DurationArg::Text),
            expires_at: self.expires_at.map(TimeArg::Text),
            upsert: UpsertArgs {
                on_duplicate: self.on_duplicate,
                max_wait: self
                    .max_wait
                    .map(|w| DurationArg::Text(w).get("max_wait"))
                    .transpose()?,
                if_in_flight: self.if_in_flight,
            },
            handler_timeout: self.handler_timeout.map(DurationArg::Text),
            replicas: None,
            traceparent: None,
        })
    }
}

/// The options of a send.
#[derive(Debug, Default)]
pub struct MessageOptions {
    /// Due this long after Redis receives the request.
    pub delay: Option<DurationArg>,
    /// Due at this time.
    pub deliver_at: Option<TimeArg>,
    /// The caller's id.
    pub id: Option<String>,
    /// Deliveries before the dead letters.
    pub max_attempts: Option<u64>,
    /// Retry policy.
    pub backoff: Option<BackoffArg>,
    /// Priority, 0 to 9.
    pub priority: Option<u64>,
    /// Its group.
    pub group: Option<String>,
    /// How long after its due time it may still be delivered.
    pub ttl: Option<DurationArg>,
    /// When it may no longer be delivered.
    pub expires_at: Option<TimeArg>,
    /// What it does to a message of its id that exists.
    pub upsert: UpsertArgs,
    /// How long a worker may spend on it.
    pub handler_timeout: Option<DurationArg>,
    /// Replicas to wait for.
    pub replicas: Option<ReplicasArg>,
    /// W3C trace context.
    pub traceparent: Option<String>,
}

impl MessageOptions {
    /// As the library takes them (kind left as bytes).
    pub fn send_options(self, limits: &Limits) -> ApiResult<SendOptions> {
        let schedule = ScheduleArgs {
            delay: self.delay,
            deliver_at: self.deliver_at,
        };
        let mut options = SendOptions::new().schedule(schedule.schedule(limits)?);
        if let Some(id) = self.id {
            options = options.id(id);
        }
        if let Some(n) = self.max_attempts {
            let n = u16::try_from(n).map_err(|_| {
                ApiError::bad_request("invalid_option", "max_attempts is 1 to 65535")
            })?;
            options = options.max_attempts(n);
        }
        if let Some(p) = self.priority {
            let p = u8::try_from(p)
                .ok()
                .filter(|p| *p <= MAX_PRIORITY)
                .ok_or_else(|| {
                    ApiError::bad_request(
                        "invalid_option",
                        format!("priority is 0 to {MAX_PRIORITY}, not {p}"),
                    )
                })?;
            options = options.priority(p);
        }
        if let Some(group) = self.group {
            options = options.group(group);
        }
        if let Some(traceparent) = self.traceparent {
            options = options.traceparent(traceparent);
        }
        match (self.ttl, self.expires_at) {
            (Some(_), Some(_)) => {
                return Err(ApiError::bad_request(
                    "invalid_option",
                    "give ttl or expires_at, not both",
                ))
            }
            (Some(ttl), None) => options = options.ttl(ttl.get("ttl")?),
            (None, Some(at)) => options = options.expires_at(at.unix_ms("expires_at")?),
            (None, None) => {}
        }
        options = self.upsert.apply(options)?;
        if let Some(timeout) = self.handler_timeout {
            options = options.handler_timeout(timeout.get("handler_timeout")?);
        }
        if let Some(replicas) = self.replicas {
            let timeout = match replicas.timeout {
                Some(t) => t.get("replicas.timeout")?,
                None => Duration::from_secs(1),
            };
            options = options.replicas(replicas.count, timeout);
        }
        if let Some(backoff) = self.backoff {
            let (policy, jitter) = match backoff {
                BackoffArg::Fixed {
                    delay,
                    jitter_percent,
                } => (Backoff::fixed(delay.get("backoff.delay")?), jitter_percent),
                BackoffArg::Exponential {
                    base,
                    cap,
                    factor,
                    jitter_percent,
                } => (
                    Backoff::exponential(base.get("backoff.base")?, cap.get("backoff.cap")?)
                        .with_factor(factor.unwrap_or(2)),
                    jitter_percent,
                ),
                BackoffArg::Linear {
                    base,
                    cap,
                    jitter_percent,
                } => (
                    Backoff::linear(base.get("backoff.base")?, cap.get("backoff.cap")?),
                    jitter_percent,
                ),
                BackoffArg::List {
                    delays,
                    jitter_percent,
                } => {
                    let delays = delays
                        .iter()
                        .map(|d| d.get("backoff.delays"))
                        .collect::<ApiResult<Vec<_>>>()?;
                    (Backoff::steps(&delays), jitter_percent)
                }
            };
            options = options.backoff(policy.with_jitter(jitter.unwrap_or(0)));
        }
        Ok(options)
    }
}
