//! One claim: up to `max` due messages of one partition taken under a lease, in one
//! script call (`claim.lua`), which also reclaims expired leases. A record that cannot be
//! decoded is moved to the dead letters (`bury.lua`), one whose sealed payload this client
//! cannot open (`handles/sealed.rs`) becomes a dead letter as it is (`nack.lua`), each with
//! the reason, and both are left out of the claim.

use std::time::Duration;

use tokio::time::Instant;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::handles::sealed;
use crate::store::keys::Keys;
use crate::store::scripts::SCRIPTS;
use crate::values::delivery::Delivery;
use crate::values::error::{Error, Result};
use crate::values::message::DeadLettered;
use crate::values::options::{checked_ms, ReceiveOptions};
use crate::values::receipt::Held;
use crate::values::record::{self, lease_member};
use crate::values::reply::Reply;

/// How a lane claims: the token base, and what kind of consumer it is.
pub(crate) struct ClaimTerms {
    /// Lease tokens are this + 1, + 2, ...
    pub(crate) base: u64,
    /// This call repeats the claim with token base `base`, whose reply was lost.
    pub(crate) repeat: bool,
    /// Write the claim record that a repeat reads (a consumer that never repeats leaves
    /// none).
    pub(crate) remember: bool,
    /// For push delivery ([`QueueSet::pushing`](crate::QueueSet::pushing)).
    pub(crate) push: bool,
    /// Also take what comes due within this time ([`crate::Config::look_ahead`]).
    pub(crate) look_ahead: Duration,
}

/// What one claim found.
pub(crate) struct Claim {
    pub(crate) deliveries: Vec<Delivery>,
    /// Per delivery, how long until it comes due by the Redis server's clock as the claim
    /// ran (zero: it was due): one taken ahead is handed over no sooner than that after the
    /// reply arrived, which is never before its due time.
    pub(crate) due_in: Vec<Duration>,
    /// What the claim made dead letters (expired leases on their last attempt, unreadable
    /// records).
    pub(crate) dead_lettered: Vec<DeadLettered>,
    /// When to claim again: the time until something comes due or a lease expires (zero if
    /// more may be due now), `None` if nothing is pending or leased.
    pub(crate) next_event: Option<Duration>,
    /// Per ack the claim carried, whether it was acked (`false`: its lease was lost).
    pub(crate) acked: Vec<bool>,
}

/// Most expired leases one claim reclaims; the rest follow on the next call.
const RECLAIM_PER_CLAIM: usize = 100;

/// Claims up to `options.max` due messages from partition `keys` (one script call, no
/// waiting), on `terms`: with `repeat`, returns what the earlier claim with token base
/// `base` took instead, if it ran (`claim.lua`). A record that cannot be decoded is moved
/// to the dead letters and left out; the rest of the claim is delivered. The call first
/// acks `acks`, deliveries of this partition whose handlers finished (`ack_carry.rs`).
pub(crate) async fn from_partition(
    core: &QueueCore,
    keys: &Keys,
    claim_record: &str,
    options: &ReceiveOptions,
    terms: &ClaimTerms,
    acks: &[impl Held],
) -> Result<Claim> {
    let lease_ms = checked_ms(options.lease, "lease")?;
    let flag = |on: bool| if on { "1" } else { "0" };
    let mut inv = invocation(keys, &SCRIPTS.claim);
    inv.key(claim_record)
        .arg(options.max)
        .arg(lease_ms)
        .arg(rand::random::<f64>())
        .arg(RECLAIM_PER_CLAIM)
        .arg(terms.base)
        .arg(flag(terms.repeat))
        .arg(flag(terms.push))
        .arg(flag(terms.remember))
        .arg(terms.look_ahead.as_micros() as u64);
    for d in acks {
        inv.ack_of(d);
    }
    // The lease began after this moment in Redis, so it ends no earlier than this + lease
    // (one taken ahead: + the time until it comes due, claim.lua).
    let expires = Instant::now() + options.lease;
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let next_event_us = r.int()?;
    let lease_deadline_ms = r.uint()?;
    let mut token = r.uint()?;
    let now_us = r.uint()?;
    let reclaimed_retry = r.uint()?;
    let mut dead_lettered = Vec::new();
    let mut buried = r.array()?;
    let m = core.metrics();
    let mut reclaimed_dead = 0;
    while buried.remaining() > 0 {
        let (id, error) = (buried.string()?, buried.string()?);
        // claim.lua's names of messages that expired (expiry.lua), as a dead letter or not.
        match error.as_str() {
            "expired, dropped" => m.expired.increment(1),
            "expired" => {
                m.expired.increment(1);
                dead_lettered.push(death(core, id, error));
            }
            _ => {
                reclaimed_dead += 1;
                dead_lettered.push(death(core, id, error));
            }
        }
    }
    let acked = r.array()?.flags()?;
    if acked.len() != acks.len() {
        return Err(Error::Protocol(format!(
            "a claim carrying {} acks answered {}",
            acks.len(),
            acked.len()
        )));
    }
    m.acked
        .increment(acked.iter().filter(|a| **a).count() as u64);
    m.lease_expired.increment(reclaimed_retry + reclaimed_dead);
    m.retried.increment(reclaimed_retry);
    m.dead_lettered.increment(dead_lettered.len() as u64);
    let mut deliveries = Vec::with_capacity(r.remaining());
    let mut due_in = Vec::with_capacity(r.remaining());
    let mut undecodable = Vec::new();
    let mut unopened = Vec::new();
    while r.remaining() > 0 {
        token += 1;
        let Some(raw) = r.opt_bytes()? else {
            continue; // a repeated claim's message that is no longer held under it
        };
        let seq = record::seq_of(&raw);
        let opened = record::decode(raw).map(|mut rec| {
            let stored = std::mem::take(&mut rec.payload);
            let opened = sealed::open(core, rec.sealed, stored);
            (rec, opened)
        });
        match opened {
            Ok((rec, Err(undecryptable))) => {
                unopened.push((lease_member(seq, token), rec.id, undecryptable.to_string()));
            }
            Ok((mut rec, Ok(payload))) => {
                rec.payload = payload;
                let late_us = now_us.saturating_sub(rec.due_us);
                m.lateness.record(late_us as f64 / 1e6);
                let ahead = Duration::from_micros(rec.due_us.saturating_sub(now_us));
                due_in.push(ahead);
                let (lease_deadline_ms, expires) = match ahead.is_zero() {
                    true => (lease_deadline_ms, expires),
                    false => (rec.due_us.div_ceil(1000) + lease_ms, expires + ahead),
                };
                deliveries.push(Delivery {
                    queue: core.name().clone(),
                    id: rec.id,
                    payload: rec.payload,
                    // The record is as it was pending; this delivery is one more attempt.
                    attempt: u32::from(rec.attempts) + 1,
                    due_ms: rec.due_us / 1000,
                    lease_deadline_ms,
                    expires,
                    token,
                    seq: rec.seq,
                    explicit_id: rec.explicit_id,
                    kind: rec.kind,
                    handler_timeout: rec.handler_timeout,
                    priority: rec.priority,
                    group: rec.group,
                    expires_at_ms: rec.deadline_ms,
                    traceparent: rec.traceparent,
                    sealed: rec.sealed,
                })
            }
            Err(e) => undecodable.push((lease_member(seq, token), format!("undecodable: {e}"))),
        }
    }
    m.delivered.increment(deliveries.len() as u64);
    if !undecodable.is_empty() {
        dead_lettered.extend(bury(core, keys, &undecodable).await);
    }
    if !unopened.is_empty() {
        dead_lettered.extend(dead_now(core, keys, &unopened).await);
    }
    Ok(Claim {
        dead_lettered,
        deliveries,
        due_in,
        next_event: u64::try_from(next_event_us).ok().map(Duration::from_micros),
        acked,
    })
}

/// Moves claimed messages whose record could not be decoded to the dead letters. A
/// failure is only logged: the messages come back when their lease expires.
async fn bury(
    core: &QueueCore,
    keys: &Keys,
    undecodable: &[([u8; 12], String)],
) -> Vec<DeadLettered> {
    let mut inv = invocation(keys, &SCRIPTS.bury);
    let errors: Vec<String> = undecodable.iter().map(|(_, error)| error.clone()).collect();
    for (member, error) in undecodable {
        inv.arg(&member[..]).arg(error);
    }
    let mut buried = Vec::new();
    match core.invoke(&inv).await.and_then(Reply::new) {
        Ok(mut r) => {
            for error in errors {
                if let Ok(Some(id)) = r.opt_string() {
                    tracing::error!(queue = %core.name(), id = %id, error = %error, "a message that cannot be read moved to the dead letters");
                    buried.push(death(core, id, error));
                }
            }
        }
        Err(e) => {
            tracing::warn!(queue = %core.name(), error = %e, "could not move undecodable records to the dead letters; they return after their lease");
        }
    }
    buried
}

/// Makes claimed messages whose sealed payload this client cannot open dead letters now,
/// under their own ids and with their records as they are (`nack.lua`, mode `d`), so that a
/// client that holds the key can requeue them. A failure is only logged: the messages come
/// back when their lease expires.
async fn dead_now(
    core: &QueueCore,
    keys: &Keys,
    unopened: &[([u8; 12], String, String)],
) -> Vec<DeadLettered> {
    let mut inv = invocation(keys, &SCRIPTS.nack);
    for (member, _, error) in unopened {
        inv.arg(&member[..])
            .arg("d")
            .arg(error)
            .arg("")
            .arg("0")
            .arg("")
            .arg("");
    }
    let mut dead = Vec::new();
    match core.invoke(&inv).await.and_then(Reply::new) {
        Ok(mut r) => {
            for (_, id, error) in unopened {
                if r.string().is_ok_and(|outcome| outcome == "dead") {
                    tracing::error!(queue = %core.name(), id = %id, error = %error, "a message this process cannot open moved to the dead letters");
                    dead.push(death(core, id.clone(), error.clone()));
                }
            }
        }
        Err(e) => {
            tracing::warn!(queue = %core.name(), error = %e, "could not move messages this process cannot open to the dead letters; they return after their lease");
        }
    }
    dead
}

fn death(core: &QueueCore, id: String, error: String) -> DeadLettered {
    DeadLettered {
        queue: core.name().clone(),
        id,
        error,
    }
}
