//! The promise of the event stream under faults (README, "Events"): an event is written if
//! and only if its change was, because the script that makes a change records it. The queue
//! of a run records events (about ten million per partition, so none is trimmed), and after
//! the run the checker reads them all and balances them against what is left:
//!
//! * Every record of a message that was sent ends exactly once, so per id the records that
//!   began (`sent`, and `requeued` dead letters) equal those that ended (`acked`, `dead`,
//!   `expired`, `superseded`, `cancelled`): the queue is drained after the run. A lost event,
//!   or one written for a change that did not happen (a stale ack, a claim undone by a
//!   restart), unbalances its id.
//! * Per id, the dead letters made (`dead`, and `expired` without `dropped`) less those that
//!   left (`requeued`, `purged`) are the dead letters left after the run.
//! * On one Redis (its AOF written before each reply: nothing acknowledged is lost), each
//!   delivery a handler started has its `delivered` event: per id, no fewer `delivered`
//!   events than distinct lease tokens its handlers ran under. On a Redis Cluster a claim
//!   made on a master that was killed before its replica had it is undone with its event,
//!   while its handler may have run: that check is for one Redis only.

use std::collections::{HashMap, HashSet};

use crate::evidence::{DeadOne, Recorded};
use crate::hold::Hold;

/// What the event checks found.
pub struct EventVerdict {
    /// Events read after the run (a run without any proved nothing of events).
    pub events: u64,
    /// Ids whose records that began and ended do not balance.
    pub unbalanced: u64,
    /// Ids whose dead letters made and gone do not match those left.
    pub dead_unbalanced: u64,
    /// Ids with fewer `delivered` events than deliveries their handlers started (one Redis).
    pub deliveries_without_event: u64,
    /// Examples, for the report.
    pub examples: Vec<String>,
}

/// Per id: records begun, records ended, dead letters made less gone, deliveries.
#[derive(Default, Debug)]
struct Tally {
    began: i64,
    ended: i64,
    dead: i64,
    delivered: u64,
}

/// Balances `events` against the dead letters left and the handlers' holds. Without events
/// there is nothing to balance: a run that recorded none fails on that (`controller.rs`).
pub fn check(
    events: &[Recorded],
    dead_letters: &[DeadOne],
    holds: &HashMap<String, Vec<Hold>>,
    one_redis: bool,
) -> EventVerdict {
    if events.is_empty() {
        return EventVerdict {
            events: 0,
            unbalanced: 0,
            dead_unbalanced: 0,
            deliveries_without_event: 0,
            examples: Vec::new(),
        };
    }
    let mut tallies: HashMap<&str, Tally> = HashMap::new();
    for e in events {
        let t = tallies.entry(e.id.as_str()).or_default();
        match e.kind.as_str() {
            "sent" => t.began += 1,
            "requeued" => {
                t.began += 1;
                t.dead -= 1;
            }
            "acked" | "superseded" | "cancelled" => t.ended += 1,
            "dead" => {
                t.ended += 1;
                t.dead += 1;
            }
            "expired" => {
                t.ended += 1;
                t.dead += i64::from(!e.dropped);
            }
            "purged" => t.dead -= 1,
            "delivered" => t.delivered += 1,
            _ => {}
        }
    }
    let left: HashSet<&str> = dead_letters.iter().map(|d| d.id.as_str()).collect();
    let mut verdict = EventVerdict {
        events: events.len() as u64,
        unbalanced: 0,
        dead_unbalanced: 0,
        deliveries_without_event: 0,
        examples: Vec::new(),
    };
    let mut example = |text: String| {
        if verdict.examples.len() < 5 {
            verdict.examples.push(text);
        }
    };
    let mut ids: Vec<&str> = tallies
        .keys()
        .copied()
        .chain(left.iter().copied())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    for id in ids {
        let t = tallies.get(id);
        let (began, ended, dead) = t.map_or((0, 0, 0), |t| (t.began, t.ended, t.dead));
        if began != ended {
            verdict.unbalanced += 1;
            example(format!("{id}: {began} records began, {ended} ended: {t:?}"));
        }
        if dead != i64::from(left.contains(id)) {
            verdict.dead_unbalanced += 1;
            example(format!(
                "{id}: {dead} dead letters by its events, {} left",
                u8::from(left.contains(id))
            ));
        }
    }
    if one_redis {
        for (id, held) in holds {
            let tokens: HashSet<(Option<u64>, &str)> =
                held.iter().map(|h| (h.seq, h.token.as_str())).collect();
            let delivered = tallies.get(id.as_str()).map_or(0, |t| t.delivered);
            if delivered < tokens.len() as u64 {
                verdict.deliveries_without_event += 1;
                example(format!(
                    "{id}: {} deliveries started, {delivered} delivered events",
                    tokens.len()
                ));
            }
        }
    }
    verdict
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: &str, id: &str) -> Recorded {
        Recorded {
            kind: kind.into(),
            id: id.into(),
            dropped: false,
        }
    }

    fn dead_one(id: &str) -> DeadOne {
        DeadOne {
            id: id.into(),
            died_ms: 0,
            payload: None,
            last_error: None,
        }
    }

    #[test]
    fn a_balanced_run_passes() {
        let events = [
            ev("sent", "a"),
            ev("delivered", "a"),
            ev("retry", "a"),
            ev("delivered", "a"),
            ev("acked", "a"),
            ev("sent", "b"),
            ev("delivered", "b"),
            ev("dead", "b"),
            ev("sent", "c"),
            Recorded {
                dropped: true,
                ..ev("expired", "c")
            },
        ];
        let v = check(&events, &[dead_one("b")], &HashMap::new(), true);
        assert_eq!(
            (v.unbalanced, v.dead_unbalanced),
            (0, 0),
            "{:?}",
            v.examples
        );
    }

    #[test]
    fn a_missing_or_extra_event_is_caught() {
        // An ack without its event; an ack event without a send; a dead letter left that no
        // event made.
        let events = [ev("sent", "a"), ev("acked", "b")];
        let v = check(&events, &[dead_one("c")], &HashMap::new(), true);
        assert_eq!(v.unbalanced, 2, "{:?}", v.examples);
        assert_eq!(v.dead_unbalanced, 1, "{:?}", v.examples);
    }
}
