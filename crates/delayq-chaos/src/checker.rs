//! The checker: reads every history of a run and what was left in Redis, and decides whether
//! delayq kept its promise. Acknowledged sends are all processed (nothing lost), nothing is
//! left behind, no message is ever held by two live handlers at once, none is delivered
//! before it is due, and every duplicate has a cause the model allows: its earlier holder was
//! killed, or could not get its ack through (lease lost, Redis or server unreachable).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::history::{read_all, Event, Fault, Outcome};

/// What was left of the queue in Redis after the run (entries per key).
#[derive(Debug, Default, Clone)]
pub struct Leftovers {
    pub pending: u64,
    pub in_flight: u64,
    pub dead: u64,
    pub index: u64,
    pub held: u64,
    pub dead_records: u64,
    pub errors: u64,
}

/// The checker's verdict.
pub struct Report {
    pub passed: bool,
    pub table: String,
}

/// One handler's hold on a delivery.
struct Hold {
    pid: u32,
    token: String,
    start: u64,
    end: Option<u64>,
    outcome: Option<Outcome>,
    early: bool,
}

/// Reads the histories in `dir` and checks them.
/// `in_redis` says whether a message id is still in Redis (in any state).
pub fn check(
    dir: &Path,
    left: &Leftovers,
    faults: &BTreeMap<Fault, u32>,
    in_redis: &dyn Fn(&str) -> bool,
) -> Result<Report, String> {
    let (events, torn) = read_all(dir).map_err(|e| format!("reading histories: {e}"))?;
    let mut sent: HashMap<String, u64> = HashMap::new();
    let mut holds: HashMap<String, Vec<Hold>> = HashMap::new();
    let mut ends: HashMap<(u32, String), (u64, Outcome)> = HashMap::new();
    let mut settles: HashMap<(u32, String), Vec<String>> = HashMap::new();
    let mut unsettled_pids: HashSet<u32> = HashSet::new();
    let mut killed: HashMap<u32, u64> = HashMap::new();
    let mut crashed = 0;
    for event in events {
        match event {
            Event::Sent { n, id, .. } => {
                sent.insert(id, n);
            }
            Event::Start {
                pid,
                id,
                token,
                due_ms,
                nb_us,
                at_us,
                ..
            } => {
                let early = at_us < nb_us || at_us < due_ms * 1000;
                holds.entry(id).or_default().push(Hold {
                    pid,
                    token,
                    start: at_us,
                    end: None,
                    outcome: None,
                    early,
                });
            }
            Event::End {
                pid,
                token,
                outcome,
                at_us,
                ..
            } => {
                ends.insert((pid, token), (at_us, outcome));
            }
            Event::Settle {
                pid,
                id: Some(id),
                result,
                ..
            } => {
                settles.entry((pid, id)).or_default().push(result);
            }
            Event::Settle {
                pid,
                id: None,
                result,
                ..
            } => {
                if result.contains("settling did not finish") {
                    unsettled_pids.insert(pid);
                }
            }
            Event::Fault {
                fault: Fault::KillWorker,
                pid: Some(pid),
                at_us,
            } => {
                killed.insert(pid, at_us);
            }
            Event::Fault {
                fault: Fault::Crashed,
                ..
            } => crashed += 1,
            Event::Fault { .. } => {}
        }
    }

    let mut vanished = 0;
    let mut double_held = Vec::new();
    let mut early = 0;
    let mut duplicates: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut unexplained = Vec::new();
    let mut processed: HashSet<&str> = HashSet::new();
    let mut unacknowledged_copies = 0;
    for (id, list) in holds.iter_mut() {
        for h in list.iter_mut() {
            if let Some(&(at, outcome)) = ends.get(&(h.pid, h.token.clone())) {
                h.end = Some(at);
                h.outcome = Some(outcome);
            } else if let Some(&at) = killed.get(&h.pid) {
                h.end = Some(at);
            } else {
                vanished += 1;
            }
            early += u64::from(h.early);
        }
        list.sort_by_key(|h| h.start);
        // Two live holders at once: a hold starting before an earlier one ended.
        let mut held_until = 0;
        for h in list.iter() {
            if h.start < held_until {
                double_held.push(id.clone());
            }
            held_until = held_until.max(h.end.unwrap_or(u64::MAX));
        }
        let done: Vec<&Hold> = list
            .iter()
            .filter(|h| h.outcome == Some(Outcome::Ok))
            .collect();
        if !done.is_empty() {
            processed.insert(id.as_str());
            if !sent.contains_key(id) {
                unacknowledged_copies += 1;
            }
        }
        for pair in done.windows(2) {
            let earlier = pair[0];
            let results = settles
                .get(&(earlier.pid, id.clone()))
                .cloned()
                .unwrap_or_default();
            let cause = if results.iter().any(|r| r.contains("lease")) {
                "earlier ack refused, its lease had passed"
            } else if results
                .iter()
                .any(|r| r.contains("not settled") || r.contains("could not settle"))
            {
                "earlier ack not confirmed: Redis or server unreachable"
            } else if killed
                .get(&earlier.pid)
                .is_some_and(|&k| k >= earlier.end.unwrap_or(0))
                && !results.iter().any(|r| r.contains("settled"))
            {
                "earlier holder killed (-9) before its ack landed"
            } else if unsettled_pids.contains(&earlier.pid) {
                "earlier holder shut down before its ack landed"
            } else {
                unexplained.push(id.clone());
                "unexplained"
            };
            *duplicates.entry(cause).or_default() += 1;
        }
    }
    let never_processed: Vec<&String> = sent
        .keys()
        .filter(|id| !processed.contains(id.as_str()))
        .collect();
    let stuck = left.pending + left.in_flight + left.dead;
    let orphans = left.index + left.held + left.dead_records + left.errors;
    let lease_lost_acks = settles
        .values()
        .flatten()
        .filter(|r| r.contains("lease"))
        .count();
    let holds_total: usize = holds.values().map(Vec::len).sum();
    let distinct_n: HashSet<u64> = sent.values().copied().collect();

    let mut t = String::new();
    let fault = |f: Fault| faults.get(&f).copied().unwrap_or(0);
    let _ = writeln!(
        t,
        "messages acknowledged: {} (ids: {}), handler runs: {holds_total}",
        distinct_n.len(),
        sent.len()
    );
    let _ = writeln!(
        t,
        "faults: {} worker kill -9, {} worker SIGTERM, {} Redis kill -9 (+restart), {} Redis SIGSTOP ({} s each), \
         {} server kill -9 (+restart), {} connection cuts, {} half-open connections",
        fault(Fault::KillWorker), fault(Fault::TermWorker), fault(Fault::KillRedis), fault(Fault::FreezeRedis),
        crate::controller::FREEZE.as_secs(), fault(Fault::KillServer), fault(Fault::CutConnections), fault(Fault::HalfOpen),
    );
    let _ = writeln!(t);
    let _ = writeln!(t, "| check | count | must be |");
    let _ = writeln!(t, "|---|---:|---|");
    let mut passed = true;
    let mut row = |name: &str, n: u64, zero: bool| {
        let must = if zero { "0" } else { "counted" };
        if zero && n != 0 {
            passed = false;
        }
        let _ = writeln!(t, "| {name} | {n} | {must} |");
    };
    let lost: Vec<&str> = never_processed
        .iter()
        .map(|s| s.as_str())
        .filter(|id| !in_redis(id))
        .collect();
    row(
        "acknowledged sends lost (never processed, not in Redis)",
        lost.len() as u64,
        true,
    );
    row(
        "acknowledged sends never processed",
        never_processed.len() as u64,
        true,
    );
    row(
        "stuck in Redis after the run (pending, in flight, dead)",
        stuck,
        true,
    );
    row("index entries left without a message", orphans, true);
    row(
        "held by two live holders at once",
        double_held.len() as u64,
        true,
    );
    row("delivered before due", early, true);
    row("holders that vanished (no end, not killed)", vanished, true);
    row("processes that crashed or hung", crashed, true);
    row("history lines torn by a kill", torn as u64, false);
    row("acks refused: lease lost", lease_lost_acks as u64, false);
    row(
        "extra copies from sends retried without an id",
        unacknowledged_copies,
        false,
    );
    for (cause, n) in &duplicates {
        if *cause != "unexplained" {
            row(&format!("duplicates: {cause}"), *n, false);
        }
    }
    row("duplicates: unexplained", unexplained.len() as u64, true);
    let examples = [
        (
            "never processed",
            never_processed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>(),
        ),
        (
            "double-held",
            double_held.iter().map(String::as_str).collect(),
        ),
        (
            "unexplained duplicate",
            unexplained.iter().map(String::as_str).collect(),
        ),
    ];
    for (what, ids) in examples {
        if !ids.is_empty() {
            let _ = writeln!(
                t,
                "{what}: {}",
                ids.iter().take(10).copied().collect::<Vec<_>>().join(", ")
            );
        }
    }
    let _ = writeln!(t, "{}", if passed { "PASSED" } else { "FAILED" });
    Ok(Report { passed, table: t })
}

#[cfg(test)]
mod tests {
    //! The checker must catch what it exists to catch: each test writes a small history
    //! with one violation and expects it to fail the run, beside a clean one that passes.

    use super::*;
    use crate::history::Recorder;

    fn sent(n: u64) -> Event {
        Event::Sent {
            n,
            id: format!("m{n}"),
            nb_us: 1_000,
            at_us: 500,
            via: "library".into(),
            batch: false,
            caller_id: true,
            duplicate: false,
        }
    }

    fn start(pid: u32, n: u64, token: &str, at_us: u64) -> Event {
        Event::Start {
            pid,
            id: format!("m{n}"),
            n,
            token: token.into(),
            attempt: 1,
            due_ms: 1,
            nb_us: 1_000,
            at_us,
        }
    }

    fn end(pid: u32, n: u64, token: &str, at_us: u64) -> Event {
        Event::End {
            pid,
            id: format!("m{n}"),
            token: token.into(),
            outcome: Outcome::Ok,
            at_us,
        }
    }

    fn acked(pid: u32, n: u64, token: &str) -> Event {
        Event::Settle {
            pid,
            id: Some(format!("m{n}")),
            token: Some(token.into()),
            result: "/ack settled".into(),
            at_us: 0,
        }
    }

    fn kill(pid: u32, at_us: u64) -> Event {
        Event::Fault {
            fault: Fault::KillWorker,
            pid: Some(pid),
            at_us,
        }
    }

    fn verdict(events: &[Event], in_redis: bool) -> Report {
        let dir = tempfile::tempdir().expect("temp dir");
        let recorder = Recorder::create(&dir.path().join("all.jsonl")).expect("history");
        for e in events {
            recorder.record(e);
        }
        check(dir.path(), &Leftovers::default(), &BTreeMap::new(), &|_| {
            in_redis
        })
        .expect("check")
    }

    #[test]
    fn a_clean_history_passes() {
        let r = verdict(
            &[sent(1), start(7, 1, "a", 2_000), end(7, 1, "a", 3_000)],
            false,
        );
        assert!(r.passed, "{}", r.table);
    }

    #[test]
    fn an_acknowledged_send_never_processed_fails() {
        let r = verdict(
            &[
                sent(1),
                sent(2),
                start(7, 1, "a", 2_000),
                end(7, 1, "a", 3_000),
            ],
            false,
        );
        assert!(!r.passed, "{}", r.table);
        assert!(
            r.table
                .contains("| acknowledged sends lost (never processed, not in Redis) | 1 |"),
            "{}",
            r.table
        );
    }

    #[test]
    fn two_live_holders_at_once_fail() {
        let r = verdict(
            &[
                sent(1),
                start(7, 1, "a", 2_000),
                start(8, 1, "b", 2_500),
                end(8, 1, "b", 2_600),
                end(7, 1, "a", 3_000),
            ],
            false,
        );
        assert!(!r.passed, "{}", r.table);
        assert!(
            r.table.contains("| held by two live holders at once | 1 |"),
            "{}",
            r.table
        );
    }

    #[test]
    fn a_killed_holder_stops_holding_at_its_kill() {
        // Holder 7 is killed at 2,400 µs; holder 8 starts after that: a duplicate explained
        // by the kill, and no double hold.
        let r = verdict(
            &[
                sent(1),
                start(7, 1, "a", 2_000),
                end(7, 1, "a", 2_300),
                kill(7, 2_400),
                start(8, 1, "b", 2_500),
                end(8, 1, "b", 2_600),
            ],
            false,
        );
        assert!(r.passed, "{}", r.table);
        assert!(
            r.table
                .contains("| duplicates: earlier holder killed (-9) before its ack landed | 1 |"),
            "{}",
            r.table
        );
    }

    #[test]
    fn a_delivery_before_its_due_time_fails() {
        let r = verdict(
            &[sent(1), start(7, 1, "a", 900), end(7, 1, "a", 3_000)],
            false,
        );
        assert!(!r.passed, "{}", r.table);
        assert!(
            r.table.contains("| delivered before due | 1 |"),
            "{}",
            r.table
        );
    }

    #[test]
    fn a_duplicate_after_a_confirmed_ack_is_unexplained() {
        let r = verdict(
            &[
                sent(1),
                start(7, 1, "a", 2_000),
                end(7, 1, "a", 2_100),
                acked(7, 1, "a"),
                start(8, 1, "b", 3_000),
                end(8, 1, "b", 3_100),
            ],
            false,
        );
        assert!(!r.passed, "{}", r.table);
        assert!(
            r.table.contains("| duplicates: unexplained | 1 |"),
            "{}",
            r.table
        );
    }

    #[test]
    fn a_holder_that_vanished_fails() {
        let r = verdict(
            &[
                sent(1),
                start(7, 1, "a", 2_000),
                start(8, 1, "b", 5_000),
                end(8, 1, "b", 5_100),
            ],
            false,
        );
        assert!(!r.passed, "{}", r.table);
        assert!(
            r.table
                .contains("| holders that vanished (no end, not killed) | 1 |"),
            "{}",
            r.table
        );
    }
}
