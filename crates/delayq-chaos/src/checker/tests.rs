//! The checker must catch what it exists to catch: each test writes a small history
//! with one violation and expects it to fail the run, beside a clean one that passes.

use super::*;
use crate::history::Recorder;

/// Asserts that the report's table has the row `check` with `count`.
#[track_caller]
fn assert_row(r: &Report, check: &str, count: u64) {
    assert!(
        r.table.contains(&format!("| {check} | {count} |")),
        "no row {check:?} of {count}:\n{}",
        r.table
    );
}

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
        first_try_us: 400,
        group: None,
        expires_ms: None,
    }
}

/// Message `n` sent in `group`, due at `due_ms`, its send acknowledged at `acked_us`.
fn sent_in(n: u64, group: &str, acked_us: u64) -> Event {
    Event::Sent {
        n,
        id: format!("m{n}"),
        nb_us: 1_000,
        at_us: acked_us,
        via: "library".into(),
        batch: false,
        caller_id: false,
        duplicate: false,
        first_try_us: acked_us,
        group: Some(group.into()),
        expires_ms: None,
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
        seq: Some(6 * n + n % 6),
        lease_deadline_ms: None,
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
    verdict_on(events, in_redis, None)
}

fn verdict_on(events: &[Event], in_redis: bool, cluster: Option<&ClusterRun>) -> Report {
    verdict_left(events, in_redis, cluster, &Leftovers::default())
}

fn verdict_left(
    events: &[Event],
    in_redis: bool,
    cluster: Option<&ClusterRun>,
    left: &Leftovers,
) -> Report {
    let dir = tempfile::tempdir().expect("temp dir");
    let recorder = Recorder::create(&dir.path().join("all.jsonl")).expect("history");
    for e in events {
        recorder.record(e);
    }
    check(dir.path(), left, &BTreeMap::new(), cluster, &|_| in_redis).expect("check")
}

/// Message `n` sent with deadline `deadline_ms`.
fn sent_expiring(n: u64, deadline_ms: u64) -> Event {
    let mut e = sent(n);
    if let Event::Sent { expires_ms, .. } = &mut e {
        *expires_ms = Some(deadline_ms);
    }
    e
}

/// A start of message `n` claimed with a lease ending at `lease_deadline_ms`.
fn start_claimed(pid: u32, n: u64, token: &str, at_us: u64, lease_ms: u64) -> Event {
    let mut e = start(pid, n, token, at_us);
    if let Event::Start {
        lease_deadline_ms, ..
    } = &mut e
    {
        *lease_deadline_ms = Some(lease_ms);
    }
    e
}

/// Redis after the run: message `n` a dead letter that died at `died_ms` with `error`, with
/// its record and its error.
fn dead_in_redis(n: u64, died_ms: u64, error: &str) -> Leftovers {
    Leftovers {
        dead: 1,
        dead_records: 1,
        errors: 1,
        dead_letters: vec![crate::evidence::DeadOne {
            id: format!("m{n}"),
            died_ms,
            payload: None,
            last_error: Some(error.into()),
        }],
        ..Leftovers::default()
    }
}

/// A cluster run in which the master of partition `partition` (of 6) was killed at
/// 10,000,000 µs, without its replica frozen first.
fn failover(partition: u16, wait: bool) -> ClusterRun {
    ClusterRun {
        partitions: 6,
        wait,
        kills: vec![MasterKill {
            node: 0,
            partitions: vec![partition, partition + 3],
            stalled_from_us: None,
            killed_us: 10_000_000,
            promoted_us: 13_000_000,
            rejoined_us: 16_000_000,
        }],
    }
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
fn a_group_held_by_two_at_once_fails() {
    let r = verdict(
        &[
            sent_in(1, "g", 500),
            sent_in(2, "g", 500),
            start(7, 1, "a", 2_000),
            start(8, 2, "b", 2_500),
            end(8, 2, "b", 2_800),
            end(7, 1, "a", 3_000),
        ],
        false,
    );
    assert!(!r.passed, "{}", r.table);
    assert_row(
        &r,
        "a group (concurrency 1) held by two live holders at once",
        1,
    );
    assert_eq!(r.grouped, 2);
}

#[test]
fn a_group_served_out_of_order_fails_and_in_order_passes() {
    // m1 and m2 are due at 1 ms (sequences 7 and 14): m1 is ahead. Sent long before.
    let lease = crate::plan::LEASE.as_micros() as u64;
    let late = 10 * lease;
    let out_of_order = [
        sent_in(1, "g", 500),
        sent_in(2, "g", 500),
        start(8, 2, "b", late),
        end(8, 2, "b", late + 100),
        start(7, 1, "a", late + 200),
        end(7, 1, "a", late + 300),
    ];
    let r = verdict(&out_of_order, false);
    assert!(!r.passed, "{}", r.table);
    assert_row(
        &r,
        "a group's message started before one due ahead of it was done",
        1,
    );
    let in_order = [
        sent_in(1, "g", 500),
        sent_in(2, "g", 500),
        start(7, 1, "a", late),
        end(7, 1, "a", late + 100),
        start(8, 2, "b", late + 200),
        end(8, 2, "b", late + 300),
    ];
    let r = verdict(&in_order, false);
    assert!(r.passed, "{}", r.table);
    assert_row(
        &r,
        "a group's message started before one due ahead of it was done",
        0,
    );
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
    assert_row(&r, "held by two live holders at once", 1);
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
fn a_holders_earlier_settle_of_the_same_message_does_not_hide_its_kill() {
    // Holder 7 nacked the message's first delivery (settled), got it again, finished it
    // and was killed before its ack: the later copy is explained by the kill, not made
    // unexplained by the nack's settle.
    let r = verdict(
        &[
            sent(1),
            start(7, 1, "a", 2_000),
            Event::End {
                pid: 7,
                id: "m1".into(),
                token: "a".into(),
                outcome: Outcome::Failed,
                at_us: 2_050,
            },
            Event::Settle {
                pid: 7,
                id: Some("m1".into()),
                token: Some("a".into()),
                result: "/nack settled".into(),
                at_us: 2_060,
            },
            start(7, 1, "b", 2_100),
            end(7, 1, "b", 2_300),
            kill(7, 2_400),
            start(8, 1, "c", 2_500),
            end(8, 1, "c", 2_600),
        ],
        false,
    );
    assert!(r.passed, "{}", r.table);
    assert_row(
        &r,
        "duplicates: earlier holder killed (-9) before its ack landed",
        1,
    );
}

#[test]
fn a_delivery_before_its_due_time_fails() {
    let r = verdict(
        &[sent(1), start(7, 1, "a", 900), end(7, 1, "a", 3_000)],
        false,
    );
    assert!(!r.passed, "{}", r.table);
    assert_row(&r, "delivered before due", 1);
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
    assert_row(&r, "duplicates: unexplained", 1);
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

/// Message 1 lives in partition 1 (its sequence number is 7). Holder 7 acked it 0.1 s
/// before its master was killed; the replica that took over still had it in flight.
fn ack_lost_in_failover() -> Vec<Event> {
    vec![
        sent(1),
        start(7, 1, "a", 9_800_000),
        end(7, 1, "a", 9_900_000),
        acked(7, 1, "a"),
        start(8, 1, "b", 14_000_000),
        end(8, 1, "b", 14_100_000),
    ]
}

#[test]
fn an_ack_lost_with_its_master_explains_a_duplicate() {
    let r = verdict_on(&ack_lost_in_failover(), false, Some(&failover(1, true)));
    assert!(r.passed, "{}", r.table);
    assert_row(&r, &format!("duplicates: {ACK_LOST}"), 1);
}

#[test]
fn a_failover_of_another_master_explains_nothing() {
    let r = verdict_on(&ack_lost_in_failover(), false, Some(&failover(2, true)));
    assert!(!r.passed, "{}", r.table);
    assert_row(&r, "duplicates: unexplained", 1);
}

#[test]
fn an_ack_long_before_the_kill_was_replicated() {
    let mut events = ack_lost_in_failover();
    events[1] = start(7, 1, "a", 5_000_000);
    events[2] = end(7, 1, "a", 5_100_000);
    let r = verdict_on(&events, false, Some(&failover(1, true)));
    assert!(!r.passed, "{}", r.table);
    assert_row(&r, "duplicates: unexplained", 1);
}

#[test]
fn a_lost_send_fails_with_wait_and_is_counted_without() {
    let events = [
        sent(1),
        sent(2),
        start(7, 1, "a", 2_000),
        end(7, 1, "a", 3_000),
    ];
    let with_wait = verdict_on(&events, false, Some(&failover(1, true)));
    assert!(!with_wait.passed, "{}", with_wait.table);
    let without = verdict_on(&events, false, Some(&failover(1, false)));
    assert!(without.passed, "{}", without.table);
    assert!(
        without
            .table
            .contains("| acknowledged sends lost (never processed, not in Redis) | 1 | counted |"),
        "{}",
        without.table
    );
    // Never processed but still in Redis is stuck, not lost: that fails either way.
    let stuck = verdict_on(&events, true, Some(&failover(1, false)));
    assert!(!stuck.passed, "{}", stuck.table);
}

#[test]
fn a_send_retried_after_its_first_copy_was_delivered_makes_two_records() {
    // The first copy (sequence 7) is delivered and acked while the send is still being
    // retried; a later try writes a second record (sequence 13).
    let mut second = start(8, 1, "b", 3_000);
    if let Event::Start { seq, .. } = &mut second {
        *seq = Some(13);
    }
    let mut events = vec![
        start(7, 1, "a", 2_000),
        end(7, 1, "a", 2_100),
        acked(7, 1, "a"),
        second,
        end(8, 1, "b", 3_100),
    ];
    let mut retried = sent(1);
    if let Event::Sent { at_us, .. } = &mut retried {
        *at_us = 2_500;
    }
    events.insert(0, retried);
    let r = verdict(&events, false);
    assert!(r.passed, "{}", r.table);
    assert_row(
        &r,
        "duplicates: a send retried after its first copy was delivered (two records, one caller id)",
        1,
    );
    // The send was acknowledged before the first copy was handled: no retry can have
    // written the second record, so two records is a bug.
    if let Event::Sent { at_us, .. } = &mut events[0] {
        *at_us = 2_090;
    }
    assert!(!verdict(&events, false).passed);
    // A send never acknowledged (its producer died retrying it) may have been written
    // again at any time.
    events.remove(0);
    let r = verdict(&events, false);
    assert!(r.passed, "{}", r.table);
}

#[test]
fn a_delivery_claimed_before_its_deadline_passes_and_one_claimed_at_it_fails() {
    let lease = crate::plan::LEASE.as_millis() as u64;
    let on_time = [
        sent_expiring(1, 5_000),
        start_claimed(7, 1, "t1", 2_000, 4_999 + lease),
        end(7, 1, "t1", 2_100),
        acked(7, 1, "t1"),
    ];
    let r = verdict(&on_time, false);
    assert!(r.passed, "{}", r.table);
    assert_row(&r, "messages sent with a deadline", 1);
    let mut late = on_time.clone();
    late[1] = start_claimed(7, 1, "t1", 2_000, 5_000 + lease);
    let r = verdict(&late, false);
    assert!(!r.passed, "{}", r.table);
    assert_row(&r, "claimed at or after its deadline", 1);
}

#[test]
fn an_expired_message_is_a_dead_letter_no_earlier_than_its_deadline_less_a_backoff() {
    let backoff = crate::plan::BACKOFF_CAP.as_millis() as u64;
    let events = [sent_expiring(1, 5_000)];
    // At its deadline, or a backoff before it (a retry that would start after it).
    for died in [5_000, 5_000 - backoff] {
        let r = verdict_left(&events, true, None, &dead_in_redis(1, died, "expired"));
        assert!(r.passed, "{}", r.table);
        assert_row(&r, "expired (dead letters)", 1);
        assert_row(&r, "acknowledged sends never processed", 0);
    }
    let early = dead_in_redis(1, 5_000 - backoff - 1, "expired");
    let r = verdict_left(&events, true, None, &early);
    assert!(!r.passed, "{}", r.table);
    assert_row(
        &r,
        "expired dead letters that died more than a backoff before their deadline",
        1,
    );
    // Without a deadline, or dead for another reason, a dead letter is stuck.
    let r = verdict_left(&[sent(1)], true, None, &dead_in_redis(1, 5_000, "expired"));
    assert!(!r.passed, "{}", r.table);
    let r = verdict_left(&events, true, None, &dead_in_redis(1, 5_000, "boom"));
    assert!(!r.passed, "{}", r.table);
}
