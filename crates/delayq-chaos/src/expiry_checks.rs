//! The promise of deadlines under faults (README, "Expiry"), read from the run's history
//! and what was left in Redis: a message with a deadline ([`plan::expires`]) is never
//! claimed at or after it (the claim's time is its lease's end as claimed, by Redis's
//! clock, minus the lease), and one that was never processed is not lost but a dead letter
//! that died at or after its deadline.

use std::collections::HashMap;

use crate::plan;

const LEASE_MS: u64 = plan::LEASE.as_millis() as u64;

/// What the expiry checks found.
pub struct ExpiryVerdict {
    /// Messages sent with a deadline (the run must have some, or it proved nothing).
    pub with_deadline: u64,
    /// Deliveries claimed at or after their message's deadline.
    pub claimed_late: u64,
    /// Messages with a deadline that expired: dead letters, died at or after it.
    pub expired: Vec<String>,
    /// Dead letters with a deadline that died before it.
    pub expired_early: u64,
    /// Examples, for the report.
    pub examples: Vec<String>,
}

/// Checks every message with a deadline: `deadlines` maps ids to deadlines (unix ms),
/// `claims` lists each handler start's id and the lease end it was claimed with (unix ms,
/// Redis's clock), `dead_letters` what was dead in Redis after the run, with when each died.
pub fn check(
    deadlines: &HashMap<String, u64>,
    claims: &[(String, u64)],
    dead_letters: &[(String, u64)],
) -> ExpiryVerdict {
    let mut verdict = ExpiryVerdict {
        with_deadline: deadlines.len() as u64,
        claimed_late: 0,
        expired: Vec::new(),
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
    for (id, died_ms) in dead_letters {
        let Some(&deadline) = deadlines.get(id) else {
            continue;
        };
        if *died_ms >= deadline {
            verdict.expired.push(id.clone());
        } else {
            verdict.expired_early += 1;
            verdict.examples.push(format!(
                "{id} dead at {died_ms} ms, before its deadline {deadline} ms"
            ));
        }
    }
    verdict.examples.truncate(10);
    verdict
}
