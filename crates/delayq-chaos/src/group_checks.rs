//! The promises of groups under faults (README, "Groups"), read from the run's history: the
//! chaos queue's group concurrency is 1 ([`plan::GROUP_CONCURRENCY`]), so no group may ever
//! have two live holders at once, and each group is delivered in order: a message ahead of
//! another of its group (by priority, then due time, then send order: docs/groups.md) is
//! handled (done) before that one starts, retries and redeliveries after a kill included (a
//! retry keeps its group's turn).

use std::collections::HashMap;

use crate::history::Outcome;
use crate::hold::Hold;
use crate::plan;

const LEASE_US: u64 = plan::LEASE.as_micros() as u64;

/// What the group checks found.
pub struct GroupVerdict {
    /// Messages sent with a group (the run must have some, or it proved nothing).
    pub grouped: u64,
    /// Handler runs that started while another message of their group was held.
    pub two_at_once: u64,
    /// Pairs of one group where the later one started before the earlier one was done.
    pub out_of_order: u64,
    /// Examples, for the report.
    pub examples: Vec<String>,
}

/// A grouped message's place: its order key (its due time as sent, then its sequence), when
/// its send was acknowledged, when it first started, and when it was first done.
struct Placed<'a> {
    id: &'a str,
    priority: u8,
    due_us: u64,
    seq: Option<u64>,
    acked_us: u64,
    first_start: u64,
    first_done: Option<u64>,
}

/// Checks every group. `holds` have their ends filled in (a killed holder's at its kill);
/// `groups` maps message ids to their groups; `acked` gives each id's send acknowledgement
/// time (µs); `expired` when each message that expired died (µs): it left its group then,
/// as a message that is done does; `priorities` each message's priority.
pub fn check(
    holds: &HashMap<String, Vec<Hold>>,
    groups: &HashMap<String, String>,
    acked: &HashMap<String, (u64, u64)>,
    expired: &HashMap<String, u64>,
    priorities: &HashMap<String, u8>,
) -> GroupVerdict {
    let mut by_group: HashMap<&str, Vec<&str>> = HashMap::new();
    for (id, group) in groups {
        by_group
            .entry(group.as_str())
            .or_default()
            .push(id.as_str());
    }
    let mut verdict = GroupVerdict {
        grouped: groups.len() as u64,
        two_at_once: 0,
        out_of_order: 0,
        examples: Vec::new(),
    };
    for (group, ids) in &by_group {
        // Two live holders at once: every hold of the group, by start.
        let mut all: Vec<(&str, &Hold)> = ids
            .iter()
            .flat_map(|id| holds.get(*id).into_iter().flatten().map(move |h| (*id, h)))
            .collect();
        all.sort_by_key(|(_, h)| h.start);
        let mut held_until = 0;
        let mut holder = "";
        for (id, h) in &all {
            if h.start < held_until {
                verdict.two_at_once += 1;
                verdict
                    .examples
                    .push(format!("{group}: {id} started while {holder} was held"));
            }
            if h.end.unwrap_or(u64::MAX) > held_until {
                held_until = h.end.unwrap_or(u64::MAX);
                holder = id;
            }
        }
        // Order: an earlier message (by priority, due time, then sequence) that was sent and due
        // before a later one started must have been done by then.
        let placed: Vec<Placed> = ids
            .iter()
            .filter_map(|id| {
                let list = holds.get(*id)?;
                let first = list.iter().min_by_key(|h| h.start)?;
                Some(Placed {
                    id,
                    priority: priorities.get(*id).copied().unwrap_or(5),
                    due_us: original_due_us(id, list),
                    seq: first.seq,
                    acked_us: acked.get(*id).map_or(0, |&(_, at)| at),
                    first_start: first.start,
                    first_done: list
                        .iter()
                        .filter(|h| h.outcome == Some(Outcome::Ok))
                        .filter_map(|h| h.end)
                        .chain(expired.get(*id).copied())
                        .min(),
                })
            })
            .collect();
        for a in &placed {
            for b in &placed {
                let ahead = match (a.seq, b.seq) {
                    _ if a.priority != b.priority => a.priority > b.priority,
                    (Some(sa), Some(sb)) => (a.due_us, sa) < (b.due_us, sb),
                    _ => a.due_us < b.due_us,
                };
                // The claim that handed `b` out ran at most a lease before `b` started (a
                // worker never starts a delivery whose lease has passed), so `a` was sent and
                // due by that claim when both were more than a lease before `b`'s start.
                let claimed_after = b.first_start.saturating_sub(LEASE_US);
                let waiting = a.acked_us < claimed_after && a.due_us < claimed_after;
                if ahead && waiting && a.first_done.is_none_or(|done| done > b.first_start) {
                    verdict.out_of_order += 1;
                    verdict.examples.push(format!(
                        "{group}: {} started before {} (due ahead of it) was done",
                        b.id, a.id
                    ));
                }
            }
        }
    }
    verdict
}

/// When message `id` was first due (µs): a generated id says it exactly (`<due µs>-<seq>`);
/// otherwise the earliest due time of its deliveries (a retry is due later, and a first
/// delivery may be missing from the history: a claim whose reply a failover lost).
fn original_due_us(id: &str, holds: &[Hold]) -> u64 {
    id.split_once('-')
        .and_then(|(due, _)| due.parse::<u64>().ok())
        .unwrap_or_else(|| holds.iter().map(|h| h.due_ms * 1000).min().unwrap_or(0))
}
