//! The promise of deadlines under faults (README, "Expiry"), read from the run's history
//! and the dead letters left in Redis. A message with a deadline ([`plan::expires`]) is
//! never claimed at or after it (the claim's time is its lease's end as claimed, by Redis's
//! clock, minus the lease). One that was never processed is not lost: it is a dead letter
//! with the error `expired` that died no earlier than its deadline less one retry's backoff
//! (a failed attempt whose retry would start after the deadline expires then).
//!
//! A message's deadline follows from its payload (its due time, sent as an absolute time,
//! plus [`plan::EXPIRY_WINDOW_MS`]), so it is known for the extra copies of a retried send
//! too, which the history does not name.

use std::collections::HashMap;

use crate::evidence::DeadOne;
use crate::plan;

const LEASE_MS: u64 = plan::LEASE.as_millis() as u64;

/// What the expiry checks found.
pub struct ExpiryVerdict {
    /// Acknowledged messages sent with a deadline (the run must have some, or it proved
    /// nothing).
    pub with_deadline: u64,
    /// Deliveries claimed at or after their message's deadline.
    pub claimed_late: u64,
    /// The messages that expired, by id, with when they died (µs): dead letters with the
    /// error `expired`, no earlier than their deadline allows.
    pub expired: HashMap<String, u64>,
    /// Expired dead letters that died too early.
    pub expired_early: u64,
    /// Examples, for the report.
    pub examples: Vec<String>,
}

/// The deadline (unix ms) of the message with `payload`, if the plan gave it one.
fn deadline_of(payload: &crate::history::Payload) -> Option<u64> {
    plan::expires(payload.n).then(|| payload.nb / 1000 + plan::EXPIRY_WINDOW_MS)
}

/// Checks every message with a deadline: `deadlines` maps the acknowledged ids sent with
/// one to it (unix ms), `claims` lists each handler start's id and the lease end it was
/// claimed with (unix ms, Redis's clock), `dead_letters` what was dead after the run.
pub fn check(
    deadlines: &HashMap<String, u64>,
    claims: &[(String, u64)],
    dead_letters: &[DeadOne],
) -> ExpiryVerdict {
    let mut verdict = ExpiryVerdict {
        with_deadline: deadlines.len() as u64,
        claimed_late: 0,
        expired: HashMap::new(),
        expired_early: 0,
        examples: Vec::new(),
    };
    for (id, lease_deadline_ms) in claims {
        let Some(&deadline) = deadlines.get(id) else {
            continue;
        };
        let claimed_ms = lease_deadline_ms.saturating_sub(LEASE_MS);
        if claimed_ms >= deadline {
            verdict.claimed_late += 1;
            verdict.examples.push(format!(
                "{id} claimed at {claimed_ms} ms, its deadline {deadline} ms"
            ));
        }
    }
    let backoff_ms = plan::BACKOFF_CAP.as_millis() as u64;
    for dead in dead_letters {
        if dead.last_error.as_deref() != Some("expired") {
            continue;
        }
        let deadline = deadlines
            .get(&dead.id)
            .copied()
            .or_else(|| dead.payload.as_ref().and_then(deadline_of));
        let Some(deadline) = deadline else {
            verdict.expired_early += 1;
            verdict
                .examples
                .push(format!("{} expired without a deadline", dead.id));
            continue;
        };
        if dead.died_ms + backoff_ms < deadline {
            verdict.expired_early += 1;
            verdict.examples.push(format!(
                "{} dead at {} ms, more than a backoff before its deadline {deadline} ms",
                dead.id, dead.died_ms
            ));
        } else {
            verdict.expired.insert(dead.id.clone(), dead.died_ms * 1000);
        }
    }
    verdict.examples.truncate(10);
    verdict
}
