//! The checker: reads every history of a run and what was left in Redis, and decides whether
//! delayq kept its promise. Acknowledged sends are all processed (nothing lost), nothing is
//! left behind, no message is ever held by two live handlers at once, none is delivered
//! before it is due, and every duplicate has a cause the model allows: its earlier holder was
//! killed, or could not get its ack through (lease lost, Redis or server unreachable), or
//! the two holds were of two records of one caller id (their sequence numbers differ): the
//! send was still being retried when its first copy had been handled, so the retry found no
//! duplicate any more. The retry is the producer's (a send that waits for a replica, and did
//! not reach one in time, is tried again) or the Redis client's own: a cluster connection
//! resends a command whose answer a cut connection lost, within one call. Either way the
//! second write came before the send was acknowledged, which is the evidence asked for (a
//! send never acknowledged, its producer killed, may have been retried at any time).
//!
//! On a Redis Cluster whose masters fail over (`run --cluster`) the rules are the same, with
//! one more cause a duplicate may have: the earlier holder's ack was made on a master that was
//! killed before its replica had it, so the replica that took over still had the message.
//! Acks do not wait for replicas (only sends can), so at-least-once delivery allows this. The
//! checker accepts it only with evidence: the message's partition (its sequence number modulo
//! the partition count) was on the master killed, the earlier hold ended shortly before the
//! kill (at most [`REPLICATION_LAG_US`] before it, or before the replica was cut off), and
//! the later one started after the kill. Sends that waited for a replica must all survive; with
//! `--no-wait` the sends a failover lost are counted instead.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::path::Path;

use crate::evidence::{ClusterRun, Leftovers, MasterKill, FREEZE};
use crate::history::{read_all, Event, Fault, Outcome, REDIRECTED};
use crate::hold::Hold;

/// How far a replica may lag behind its master on loopback, at most, when nothing stalls
/// it: microseconds in practice; an ack older than this before a kill is on the replica.
const REPLICATION_LAG_US: u64 = 1_000_000;

/// The cause of a duplicate whose earlier ack a failover undid.
const ACK_LOST: &str = "earlier ack lost in a failover (not yet on the replica promoted)";

/// The checker's verdict.
pub struct Report {
    pub passed: bool,
    pub table: String,
    /// Messages sent with a group: a run without any proved nothing of groups.
    pub grouped: u64,
    /// Messages sent with a deadline: a run without any proved nothing of expiry.
    pub with_deadline: u64,
    /// Events recorded: a run without any proved nothing of events.
    pub events: u64,
}

/// The window in which an ack made on `kill`'s master can have been lost with it: from
/// [`REPLICATION_LAG_US`] before its replica stopped following (frozen, or killed with it)
/// to the kill.
fn ack_window(kill: &MasterKill) -> (u64, u64) {
    let behind_from = kill.stalled_from_us.unwrap_or(kill.killed_us);
    (
        behind_from.saturating_sub(REPLICATION_LAG_US),
        kill.killed_us,
    )
}

/// The failover that can have undone `earlier`'s ack, when `later` is a redelivery of it.
fn undone_by<'k>(cluster: &'k ClusterRun, earlier: &Hold, later: &Hold) -> Option<&'k MasterKill> {
    let partition = (earlier.seq? % u64::from(cluster.partitions)) as u16;
    let ended = earlier.end?;
    cluster.kills.iter().find(|kill| {
        let (from, to) = ack_window(kill);
        kill.partitions.contains(&partition)
            && (from..=to).contains(&ended)
            && later.start > kill.killed_us
    })
}

/// One settle of a process, of one message: its lease token (if recorded) and its result.
type Settled = (Option<String>, String);

/// Reads the histories in `dir` and checks them.
/// `in_redis` says whether a message id is still in Redis (in any state).
/// `cluster` describes a run on a Redis Cluster, `None` a run on one Redis.
pub fn check(
    dir: &Path,
    left: &Leftovers,
    faults: &BTreeMap<Fault, u32>,
    cluster: Option<&ClusterRun>,
    in_redis: &dyn Fn(&str) -> bool,
) -> Result<Report, String> {
    let (events, torn) = read_all(dir).map_err(|e| format!("reading histories: {e}"))?;
    let mut sent: HashMap<String, u64> = HashMap::new();
    // Per id sent with a group: its group.
    let mut groups: HashMap<String, String> = HashMap::new();
    // Per id sent with a deadline: the deadline (ms); and each handler start's id and the
    // lease end it was claimed with.
    let mut deadlines: HashMap<String, u64> = HashMap::new();
    let mut claims: Vec<(String, u64)> = Vec::new();
    // Per acknowledged id: when its send was first tried, and when it was acknowledged.
    let mut send_times: HashMap<String, (u64, u64)> = HashMap::new();
    let mut holds: HashMap<String, Vec<Hold>> = HashMap::new();
    let mut ends: HashMap<(u32, String), (u64, Outcome)> = HashMap::new();
    let mut settles: HashMap<(u32, String), Vec<Settled>> = HashMap::new();
    let mut unsettled_pids: HashSet<u32> = HashSet::new();
    let mut killed: HashMap<u32, u64> = HashMap::new();
    let mut crashed = 0;
    // Sends and HTTP receives a Redis Cluster redirected mid-failover that delayq (or the
    // server) called final, not retryable.
    let mut redirected = 0u64;
    for event in events {
        match event {
            Event::Sent {
                n,
                id,
                at_us,
                first_try_us,
                group,
                expires_ms,
                ..
            } => {
                if let Some(group) = group {
                    groups.insert(id.clone(), group);
                }
                if let Some(deadline) = expires_ms {
                    deadlines.insert(id.clone(), deadline);
                }
                send_times.insert(id.clone(), (first_try_us, at_us));
                sent.insert(id, n);
            }
            Event::Start {
                pid,
                id,
                token,
                due_ms,
                nb_us,
                at_us,
                seq,
                lease_deadline_ms,
                ..
            } => {
                if let Some(lease_deadline_ms) = lease_deadline_ms {
                    claims.push((id.clone(), lease_deadline_ms));
                }
                let early = at_us < nb_us || at_us < due_ms * 1000;
                holds.entry(id).or_default().push(Hold {
                    pid,
                    token,
                    start: at_us,
                    end: None,
                    outcome: None,
                    early,
                    seq,
                    due_ms,
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
                token,
                result,
                ..
            } => {
                settles.entry((pid, id)).or_default().push((token, result));
            }
            Event::Settle {
                pid,
                id: None,
                result,
                ..
            } => {
                redirected += u64::from(result.contains(REDIRECTED));
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
            Event::Fault { .. } | Event::Refused { .. } => {}
        }
    }

    let mut vanished = 0;
    let mut double_held = Vec::new();
    let mut early = 0;
    let mut duplicates: BTreeMap<&'static str, u64> = BTreeMap::new();
    let mut unexplained = Vec::new();
    // Per failover (index into the cluster's kills): the acks it undid.
    let mut acks_lost: BTreeMap<usize, u64> = BTreeMap::new();
    let mut processed: HashSet<String> = HashSet::new();
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
            processed.insert(id.clone());
            if !sent.contains_key(id) {
                unacknowledged_copies += 1;
            }
        }
        for pair in done.windows(2) {
            let (earlier, later) = (pair[0], pair[1]);
            let undone = cluster.and_then(|c| {
                let kill = undone_by(c, earlier, later)?;
                c.kills.iter().position(|k| std::ptr::eq(k, kill))
            });
            // The earlier hold's own settles: the same process may have settled an earlier
            // delivery of the message (a nack) under another token.
            let results: Vec<String> = settles
                .get(&(earlier.pid, id.clone()))
                .into_iter()
                .flatten()
                .filter(|(token, _)| token.as_ref().is_none_or(|t| *t == earlier.token))
                .map(|(_, result)| result.clone())
                .collect();
            let two_records = earlier.seq.is_some()
                && later.seq.is_some()
                && earlier.seq != later.seq
                && earlier
                    .end
                    .is_some_and(|end| send_times.get(id).is_none_or(|&(_, acked)| end < acked));
            let cause = if two_records {
                "a send retried after its first copy was delivered (two records, one caller id)"
            } else if results.iter().any(|r| r.contains("lease")) {
                "earlier ack refused, its lease had passed"
            } else if results
                .iter()
                .any(|r| r.contains("not settled") || r.contains("could not settle"))
            {
                "earlier ack not confirmed: Redis or server unreachable"
            } else if let Some(kill) = undone {
                // Before the kill rule: a holder killed at any later time has no ack on
                // record, but this one's was made, on a master that died right after.
                *acks_lost.entry(kill).or_default() += 1;
                ACK_LOST
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
    let expiry = crate::expiry_checks::check(&deadlines, &claims, &left.dead_letters);
    let priorities: HashMap<String, u8> = sent
        .iter()
        .map(|(id, &n)| (id.clone(), crate::plan::priority_of(n)))
        .collect();
    let grouped =
        crate::group_checks::check(&holds, &groups, &send_times, &expiry.expired, &priorities);
    let events =
        crate::event_checks::check(&left.events, &left.dead_letters, &holds, cluster.is_none());
    let never_processed: Vec<&String> = sent
        .keys()
        .filter(|id| !processed.contains(id.as_str()) && !expiry.expired.contains_key(*id))
        .collect();
    // An expired message is a dead letter, with its record and its error ('expired').
    let n_expired = expiry.expired.len() as u64;
    let stuck = left.pending + left.groups + left.in_flight + left.dead.saturating_sub(n_expired);
    let orphans = left.index
        + left.held
        + left.dead_records.saturating_sub(n_expired)
        + left.errors.saturating_sub(n_expired);
    let lease_lost_acks = settles
        .values()
        .flatten()
        .filter(|(_, r)| r.contains("lease"))
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
    match cluster {
        None => {
            let _ = writeln!(
                t,
                "faults: {} worker kill -9, {} worker SIGTERM, {} Redis kill -9 (+restart), {} Redis SIGSTOP ({} s each), \
                 {} server kill -9 (+restart), {} connection cuts, {} half-open connections; {} data format upgrade",
                fault(Fault::KillWorker), fault(Fault::TermWorker), fault(Fault::KillRedis), fault(Fault::FreezeRedis),
                FREEZE.as_secs(), fault(Fault::KillServer), fault(Fault::CutConnections), fault(Fault::HalfOpen),
                fault(Fault::UpgradeFormat),
            );
        }
        Some(c) => {
            let _ = writeln!(
                t,
                "faults: {} worker kill -9, {} worker SIGTERM, {} master kill -9 (replica promoted, old master \
                 restarted as a replica; {} of them with the replica cut off 1 s before the kill: frozen, link dropped), \
                 {} server kill -9 (+restart), {} cuts of every client connection (CLIENT KILL on every node)",
                fault(Fault::KillWorker), fault(Fault::TermWorker), c.kills.len(),
                c.kills.iter().filter(|k| k.stalled_from_us.is_some()).count(),
                fault(Fault::KillServer), fault(Fault::CutConnections),
            );
            let _ = writeln!(
                t,
                "sends {}",
                if c.wait {
                    "acknowledged once a replica had them (WAIT 1, 2 s)"
                } else {
                    "acknowledged without waiting for replicas (--no-wait)"
                }
            );
        }
    }
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
    // Without WAIT a failover may lose acknowledged sends: counted, not failed.
    let unprotected = cluster.is_some_and(|c| !c.wait);
    row(
        "acknowledged sends lost (never processed, not in Redis)",
        lost.len() as u64,
        !unprotected,
    );
    if unprotected {
        row(
            "acknowledged sends never processed, still in Redis",
            (never_processed.len() - lost.len()) as u64,
            true,
        );
    } else {
        row(
            "acknowledged sends never processed",
            never_processed.len() as u64,
            true,
        );
    }
    row(
        "stuck in Redis after the run (pending, groups with messages, in flight, dead)",
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
    row(
        "a group (concurrency 1) held by two live holders at once",
        grouped.two_at_once,
        true,
    );
    row(
        "a group's message started before one due ahead of it was done",
        grouped.out_of_order,
        true,
    );
    row("messages sent with a group", grouped.grouped, false);
    row(
        "claimed at or after its deadline",
        expiry.claimed_late,
        true,
    );
    row(
        "expired dead letters that died more than a backoff before their deadline",
        expiry.expired_early,
        true,
    );
    row("messages sent with a deadline", expiry.with_deadline, false);
    row(
        "ids whose events do not balance (records sent or requeued vs ended)",
        events.unbalanced,
        true,
    );
    row(
        "ids whose dead-letter events do not match the dead letters left",
        events.dead_unbalanced,
        true,
    );
    if cluster.is_none() {
        row(
            "ids with a delivery started and no delivered event",
            events.deliveries_without_event,
            true,
        );
    }
    row("events recorded", events.events, false);
    row("expired (dead letters)", n_expired, false);
    row("holders that vanished (no end, not killed)", vanished, true);
    row("processes that crashed or hung", crashed, true);
    if cluster.is_some() {
        row(
            "sends and receives failed as final on a MOVED/ASK mid-failover (retried here)",
            redirected,
            true,
        );
    }
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
        (
            "group",
            grouped.examples.iter().map(String::as_str).collect(),
        ),
        (
            "expiry",
            expiry.examples.iter().map(String::as_str).collect(),
        ),
        (
            "events",
            events.examples.iter().map(String::as_str).collect(),
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
    if let Some(c) = cluster {
        let lost_times: Vec<u64> = lost
            .iter()
            .filter_map(|id| send_times.get(*id).map(|&(_, acked)| acked))
            .collect();
        failover_table(&mut t, c, &holds, &send_times, &lost_times, &acks_lost);
    }
    let _ = writeln!(t, "{}", if passed { "PASSED" } else { "FAILED" });
    Ok(Report {
        passed,
        table: t,
        grouped: grouped.grouped,
        with_deadline: expiry.with_deadline,
        events: events.events,
    })
}

/// Each failover as the clients saw it, in seconds after the kill.
fn failover_table(
    t: &mut String,
    cluster: &ClusterRun,
    holds: &HashMap<String, Vec<Hold>>,
    send_times: &HashMap<String, (u64, u64)>,
    lost_times: &[u64],
    acks_lost: &BTreeMap<usize, u64>,
) {
    let secs = |us: u64| format!("{:.1} s", us as f64 / 1e6);
    let _ = writeln!(t);
    let _ = writeln!(
        t,
        "| failover | master (partitions) | replica cut off | replica promoted | \
         deliveries from its partitions resumed | old master back as a replica | longest send meanwhile | \
         sends lost (acknowledged in its window) | acks lost |"
    );
    let _ = writeln!(t, "|---|---|---|---:|---:|---:|---:|---:|---:|");
    for (i, kill) in cluster.kills.iter().enumerate() {
        let after = |at: u64| secs(at.saturating_sub(kill.killed_us));
        let resumed = holds
            .values()
            .flatten()
            .filter(|h| {
                h.start > kill.killed_us
                    && h.seq.is_some_and(|seq| {
                        let k = (seq % u64::from(cluster.partitions)) as u16;
                        kill.partitions.contains(&k)
                    })
            })
            .map(|h| h.start)
            .min()
            .map_or("none".to_owned(), after);
        // Sends under way at some point between the kill and the old master's return.
        let longest = send_times
            .values()
            .filter(|&&(first, acked)| {
                first > 0 && first <= kill.rejoined_us && acked >= kill.killed_us
            })
            .map(|&(first, acked)| acked - first)
            .max()
            .map_or("none".to_owned(), secs);
        let (from, to) = ack_window(kill);
        let lost = lost_times
            .iter()
            .filter(|&&at| (from..=to).contains(&at))
            .count();
        let partitions: Vec<String> = kill.partitions.iter().map(u16::to_string).collect();
        let _ = writeln!(
            t,
            "| {} | node {} ({}) | {} | {} | {resumed} | {} | {longest} | {lost} | {} |",
            i + 1,
            kill.node,
            partitions.join(", "),
            kill.stalled_from_us.map_or("no".to_owned(), |f| format!(
                "{} before the kill",
                secs(kill.killed_us - f)
            )),
            after(kill.promoted_us),
            after(kill.rejoined_us),
            acks_lost.get(&i).copied().unwrap_or(0),
        );
    }
}

#[cfg(test)]
mod tests;
