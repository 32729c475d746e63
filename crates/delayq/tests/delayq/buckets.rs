//! Messages due far ahead wait in buckets (plain lists per 100 ms of due times, from format 6
//! also per 1,024 sequence numbers) rather than in the pending sorted set, from data format
//! 5 (scripts/buckets.lua). What a user sees
//! must not change: each is delivered once, never early, and found by id, browsed in due
//! order, counted and cancelled as any pending message is. The tests make the horizon small
//! (the control field `bucket_horizon_ms`, 60 s unless set) so that buckets come due within
//! a test, and look at the keys to check where the messages wait.

use std::collections::HashSet;
use std::time::Duration;

use delayq::{
    CancelOutcome, EventKind, Message, OnDuplicate, Queue, ReceiveOptions, Schedule, SendOptions,
    Setting, State,
};

use crate::common::*;

/// The horizon the tests set: a message due more than this (and its bucket's width) ahead
/// goes to a bucket.
const HORIZON_MS: u64 = 300;

/// Queue `name` on `server`, its partition of the newest format with the tests' horizon.
async fn bucketed_queue(server: &RedisServer, dq: &delayq::DelayQ, name: &str) -> Queue {
    let q = queue(dq, name);
    q.upgrade_format().await.expect("format");
    let control = format!("dq:{{{name}}}:control");
    server.cli(&[
        "HSET",
        &control,
        "bucket_horizon_ms",
        &HORIZON_MS.to_string(),
    ]);
    q
}

/// How many records wait in `name`'s buckets, by the keys: (the counter, the lists' lengths).
fn in_buckets(server: &RedisServer, name: &str) -> (u64, u64) {
    let counted = server
        .cli(&["HGET", &format!("dq:{{{name}}}:control"), "bucketed"])
        .trim()
        .parse()
        .unwrap_or(0);
    let starts = server.cli(&["ZRANGE", &format!("dq:{{{name}}}:buckets"), "0", "-1"]);
    let listed = starts
        .lines()
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let key = format!("dq:{{{name}}}:b:{}", s.trim());
            server
                .cli(&["LLEN", &key])
                .trim()
                .parse::<u64>()
                .expect("LLEN")
        })
        .sum();
    (counted, listed)
}

fn in_pending_set(server: &RedisServer, name: &str) -> u64 {
    server
        .cli(&["ZCARD", &format!("dq:{{{name}}}:pending")])
        .trim()
        .parse()
        .expect("ZCARD")
}

/// Receives until `n` messages came (each acked), failing after `limit`; their payloads in
/// the order received, each with when it came and when it was due.
async fn receive_all(q: &Queue, n: usize, limit: Duration) -> Vec<(String, u64, u64)> {
    let mut consumer = q.consumer().await.expect("consumer");
    let deadline = tokio::time::Instant::now() + limit;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{} of {n} messages came within {limit:?}",
            got.len()
        );
        let batch = consumer
            .receive(&ReceiveOptions {
                max: 100,
                lease: Duration::from_secs(30),
                wait: Duration::from_secs(1),
            })
            .await
            .expect("receive");
        let at = now_ms();
        for d in &batch {
            got.push((
                String::from_utf8_lossy(&d.payload).into_owned(),
                at,
                d.due_ms,
            ));
        }
        if !batch.is_empty() {
            q.ack_many(&batch).await.expect("ack");
        }
    }
    got
}

#[tokio::test]
async fn a_message_due_far_ahead_waits_in_a_bucket_and_comes_on_time() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "far").await;
    let near = q
        .send(
            b"near",
            &SendOptions::new().delay(Duration::from_millis(100)),
        )
        .await
        .expect("send near");
    let far = q
        .send(
            b"far",
            &SendOptions::new().delay(Duration::from_millis(1500)),
        )
        .await
        .expect("send far");
    assert_eq!(
        in_pending_set(&server, "far"),
        1,
        "the near one is in the set"
    );
    assert_eq!(
        in_buckets(&server, "far"),
        (1, 1),
        "the far one is in a bucket"
    );
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.delayed, stats.ready), (2, 0));
    let info = q.get(&far.id).await.expect("get").expect("found");
    assert_eq!(
        (info.state, info.payload.as_slice()),
        (State::Delayed, &b"far"[..])
    );

    let got = receive_all(&q, 2, Duration::from_secs(10)).await;
    let order: Vec<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(order, ["near", "far"]);
    for (payload, at, due) in &got {
        assert!(
            at >= due,
            "{payload} came at {at}, before its due time {due}"
        );
    }
    assert_eq!(got[1].2, far.due_ms.expect("due"));
    assert_eq!(got[0].2, near.due_ms.expect("due"));
    assert_eq!(
        in_buckets(&server, "far"),
        (0, 0),
        "the bucket was moved whole"
    );
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_waiting_consumer_is_woken_to_move_a_new_first_bucket() {
    // A consumer that waits with nothing pending sleeps until woken; a send into a bucket
    // must wake it in time to move the bucket, though the message is not due for a while.
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "wake").await;
    let mut consumer = q.consumer().await.expect("consumer");
    let waiting = tokio::spawn(async move {
        consumer
            .receive(&ReceiveOptions {
                max: 1,
                lease: Duration::from_secs(30),
                wait: Duration::from_secs(20),
            })
            .await
            .expect("receive")
    });
    wait_until(Duration::from_secs(5), "the consumer to listen", || async {
        listening(&server, "wake") > 0
    })
    .await;
    let sent = q
        .send(
            b"later",
            &SendOptions::new().delay(Duration::from_millis(1200)),
        )
        .await
        .expect("send");
    assert_eq!(in_buckets(&server, "wake"), (1, 1));
    let got = tokio::time::timeout(Duration::from_secs(15), waiting)
        .await
        .expect("delivered within the wait")
        .expect("task");
    assert_eq!(payloads(&got), ["later"]);
    assert!(now_ms() >= sent.due_ms.expect("due"));
}

#[tokio::test]
async fn bucketed_messages_are_found_cancelled_rescheduled_and_replaced_by_id() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "byid").await;
    let later = Duration::from_secs(3600);
    let generated = q
        .send(b"generated", &SendOptions::new().delay(later))
        .await
        .expect("send");
    for id in ["keep", "cancel", "move", "replace"] {
        q.send(id.as_bytes(), &SendOptions::new().id(id).delay(later))
            .await
            .expect("send");
    }
    assert_eq!(in_buckets(&server, "byid"), (5, 5));
    assert_eq!(in_pending_set(&server, "byid"), 0);

    for id in [generated.id.as_str(), "keep"] {
        let info = q.get(id).await.expect("get").expect("found");
        assert_eq!(info.state, State::Delayed, "{id}");
    }
    assert_eq!(
        q.cancel(&generated.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    assert_eq!(
        q.cancel("cancel").await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    assert!(q.get("cancel").await.expect("get").is_none());
    // Rescheduled to now: out of its bucket, into the set, and delivered.
    q.reschedule("move", Schedule::Now)
        .await
        .expect("reschedule");
    // Replaced: the new message, due soon, takes the old one's place.
    q.send(
        b"replaced",
        &SendOptions::new()
            .id("replace")
            .on_duplicate(OnDuplicate::Replace),
    )
    .await
    .expect("replace");
    assert_eq!(
        in_buckets(&server, "byid"),
        (1, 1),
        "only keep is left there"
    );
    let got: HashSet<String> = receive_all(&q, 2, Duration::from_secs(10))
        .await
        .into_iter()
        .map(|(p, _, _)| p)
        .collect();
    assert_eq!(got, HashSet::from(["move".into(), "replaced".into()]));
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.delayed, stats.ready, stats.in_flight), (1, 0, 0));
}

#[tokio::test]
async fn browse_lists_the_set_and_the_buckets_in_due_order() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "browse").await;
    let base = now_ms() + 60_000;
    // Due times interleaved between the set and the buckets: with a horizon of 90 s the
    // second lot goes to the set though some of it is due after the first lot.
    let mut due_of = Vec::new();
    for i in 0..30u64 {
        due_of.push((format!("b{i:02}"), base + i * 37));
    }
    for (id, at) in &due_of {
        q.send(
            id.as_bytes(),
            &SendOptions::new().id(id.clone()).deliver_at(*at),
        )
        .await
        .expect("send");
    }
    server.cli(&["HSET", "dq:{browse}:control", "bucket_horizon_ms", "90000"]);
    for i in 0..30u64 {
        let (id, at) = (format!("s{i:02}"), base + 5 + i * 41);
        q.send(
            id.as_bytes(),
            &SendOptions::new().id(id.clone()).deliver_at(at),
        )
        .await
        .expect("send");
        due_of.push((id, at));
    }
    assert_eq!(in_buckets(&server, "browse").1, 30);
    assert_eq!(in_pending_set(&server, "browse"), 30);
    due_of.sort_by_key(|(id, at)| (*at, id.starts_with('s')));
    let expected: Vec<String> = due_of.into_iter().map(|(id, _)| id).collect();
    for page_size in [1, 7, 1000] {
        let mut listed = Vec::new();
        let mut after = None;
        loop {
            let page = q
                .list(State::Delayed, after.as_ref(), page_size)
                .await
                .expect("list");
            listed.extend(page.messages.iter().map(|m| m.id.clone()));
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        assert_eq!(listed, expected, "pages of {page_size}");
    }
}

#[tokio::test]
async fn a_batch_without_ids_puts_each_message_where_its_due_time_says() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "batch").await;
    q.configure(&[Setting::Events(Some(10_000))])
        .await
        .expect("events on");
    let batch: Vec<Message> = (0..200u64)
        .map(|i| {
            let delay = if i % 2 == 0 { 50 } else { 1000 + i * 5 };
            Message::new(
                format!("m{i}"),
                SendOptions::new().delay(Duration::from_millis(delay)),
            )
        })
        .collect();
    let sent = q.send_batch(&batch).await.expect("batch");
    assert_eq!(sent.len(), 200);
    // Each has its sent event, with the id and due time the send answered.
    let events: HashSet<(String, Option<u64>)> = q
        .latest_events(1000)
        .await
        .expect("events")
        .into_iter()
        .filter(|e| e.kind == EventKind::Sent)
        .map(|e| (e.id, e.due_ms))
        .collect();
    let answered: HashSet<(String, Option<u64>)> =
        sent.iter().map(|s| (s.id.clone(), s.due_ms)).collect();
    assert_eq!(events, answered);
    assert_eq!(in_pending_set(&server, "batch"), 100);
    assert_eq!(in_buckets(&server, "batch"), (100, 100));
    for s in sent.iter().step_by(37) {
        assert_eq!(
            q.get(&s.id).await.expect("get").expect("found").state,
            State::Delayed
        );
    }
    let got = receive_all(&q, 200, Duration::from_secs(20)).await;
    let unique: HashSet<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(unique.len(), 200, "each once");
    for (payload, at, due) in &got {
        assert!(
            at >= due,
            "{payload} came at {at}, before its due time {due}"
        );
    }
    assert_eq!(in_buckets(&server, "batch"), (0, 0));
}

/// Sends 1,500 messages due at one time `at`, in three batches; their ids.
async fn a_burst_of_one_due_time(q: &Queue, at: u64) -> Vec<String> {
    let mut ids = Vec::new();
    for lot in 0..3 {
        let batch: Vec<Message> = (0..500)
            .map(|i| Message::new(format!("{lot}-{i}"), SendOptions::new().deliver_at(at)))
            .collect();
        let sent = q.send_batch(&batch).await.expect("batch");
        ids.extend(sent.into_iter().map(|s| s.id));
    }
    ids
}

/// Receives the burst but `cancelled`: each message once, none early.
async fn the_burst_comes_once_on_time(q: &Queue, at: u64, cancelled: usize) {
    let got = receive_all(q, 1500 - cancelled, Duration::from_secs(30)).await;
    let unique: HashSet<&str> = got.iter().map(|(p, _, _)| p.as_str()).collect();
    assert_eq!(unique.len(), 1500 - cancelled, "each once");
    assert!(got.iter().all(|(_, came, _)| *came >= at));
}

#[tokio::test]
async fn a_burst_of_one_due_time_fills_buckets_by_sequence_not_the_set() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "burst").await;
    let at = now_ms() + 3_000;
    let ids = a_burst_of_one_due_time(&q, at).await;
    // Format 6: the start's bucket takes 1,000, its overflow buckets (1,024 sequence
    // numbers each) the rest.
    assert_eq!(in_buckets(&server, "burst"), (1500, 1500));
    assert_eq!(in_pending_set(&server, "burst"), 0);
    let names = server.cli(&["ZRANGE", "dq:{burst}:buckets", "0", "-1"]);
    assert!(
        names.lines().filter(|n| !n.trim().is_empty()).count() >= 2,
        "{names}"
    );
    assert_eq!(q.stats().await.expect("stats").delayed, 1500);
    // One in the start's bucket and one in an overflow bucket, found and cancelled by id.
    for id in [&ids[0], &ids[1499]] {
        let info = q.get(id).await.expect("get").expect("found");
        assert_eq!(info.state, State::Delayed);
        assert_eq!(
            q.cancel(id).await.expect("cancel"),
            CancelOutcome::Cancelled(State::Delayed)
        );
    }
    assert_eq!(in_buckets(&server, "burst"), (1498, 1498));
    the_burst_comes_once_on_time(&q, at, 2).await;
    assert_eq!(in_buckets(&server, "burst"), (0, 0));
}

#[tokio::test]
async fn a_full_bucket_of_format_5_sends_the_rest_to_the_set() {
    let (server, _dq) = setup().await;
    let (q, _) = queue_of_format(&server, "full", 5).await;
    server.cli(&[
        "HSET",
        "dq:{full}:control",
        "bucket_horizon_ms",
        &HORIZON_MS.to_string(),
    ]);
    claim(&q, 1).await;
    let at = now_ms() + 3_000;
    a_burst_of_one_due_time(&q, at).await;
    // One bucket of at most 1,000; the rest waits in the set.
    assert_eq!(in_buckets(&server, "full"), (1000, 1000));
    assert_eq!(in_pending_set(&server, "full"), 500);
    assert_eq!(q.stats().await.expect("stats").delayed, 1500);
    the_burst_comes_once_on_time(&q, at, 0).await;
}

#[tokio::test]
async fn a_retry_far_ahead_waits_in_a_bucket() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "retry").await;
    q.send(b"flaky", &SendOptions::new()).await.expect("send");
    let first = claim(&q, 1).await;
    assert_eq!(payloads(&first), ["flaky"]);
    q.nack(
        &first[0],
        "upstream down",
        Some(Duration::from_millis(1200)),
    )
    .await
    .expect("nack");
    assert_eq!(in_buckets(&server, "retry"), (1, 1));
    let info = q.get(&first[0].id).await.expect("get").expect("found");
    assert_eq!(
        (info.state, info.last_error.as_deref()),
        (State::Delayed, Some("upstream down"))
    );
    let got = receive_all(&q, 1, Duration::from_secs(10)).await;
    assert_eq!(got[0].0, "flaky");
    assert!(got[0].1 >= got[0].2);
}

#[tokio::test]
async fn buckets_nobody_moved_count_as_ready_and_late() {
    // No consumer runs: the bucket is due, and stats say so.
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "stale").await;
    let sent = q
        .send(
            b"waiting",
            &SendOptions::new().delay(Duration::from_millis(600)),
        )
        .await
        .expect("send");
    assert_eq!(in_buckets(&server, "stale"), (1, 1));
    let due = sent.due_ms.expect("due");
    wait_until(Duration::from_secs(5), "its due time to pass", || async {
        now_ms() > due + 200
    })
    .await;
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.delayed, stats.ready), (0, 1));
    assert!(
        stats.oldest_ready_lag_ms >= 200,
        "lag {}",
        stats.oldest_ready_lag_ms
    );
    let page = q.list(State::Ready, None, 10).await.expect("list");
    assert_eq!(page.messages.len(), 1);
    assert_eq!(claim(&q, 10).await.len(), 1);
}

#[tokio::test]
async fn a_partition_of_an_older_format_gets_no_buckets() {
    let (server, _dq) = setup().await;
    let (q, _) = queue_of_format(&server, "older", 4).await;
    server.cli(&["HSET", "dq:{older}:control", "bucket_horizon_ms", "300"]);
    q.send(b"far", &SendOptions::new().delay(Duration::from_secs(3600)))
        .await
        .expect("send");
    q.send_batch(&[Message::new(
        "far batch",
        SendOptions::new().delay(Duration::from_secs(3600)),
    )])
    .await
    .expect("batch");
    assert_eq!(in_buckets(&server, "older"), (0, 0));
    assert_eq!(in_pending_set(&server, "older"), 3);
}

#[tokio::test]
async fn bucketed_priorities_keep_their_order_once_moved() {
    let (server, dq) = setup().await;
    let q = bucketed_queue(&server, &dq, "prio").await;
    let at = now_ms() + 1_500;
    for (id, p) in [("low", 0u8), ("default", 5), ("high", 9)] {
        q.send(
            id.as_bytes(),
            &SendOptions::new().id(id).priority(p).deliver_at(at),
        )
        .await
        .expect("send");
    }
    assert_eq!(in_buckets(&server, "prio"), (3, 3));
    wait_until(Duration::from_secs(10), "the three to be due", || async {
        now_ms() > at
    })
    .await;
    assert_eq!(payloads(&claim(&q, 3).await), ["high", "default", "low"]);
}
