//! Priorities: among due messages a claim takes higher priorities first (within one, due
//! order then send order); a backlog of low-priority messages delays a high one by one claim
//! at most; a message keeps its priority through retries, requeues and reschedules; and a
//! priority decides nothing before a message is due.

use std::time::Duration;

use delayq::{
    InvalidInput, Message, NackOutcome, Queue, Schedule, SendOptions, DEFAULT_PRIORITY,
    MAX_PRIORITY,
};
use redis_fixture::RedisCluster;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

fn at(priority: u8) -> SendOptions {
    SendOptions::new().priority(priority)
}

/// Everything due now on `q`, in the order claims hand it out, as (id, priority).
async fn receive_all(q: &Queue, max: usize) -> Vec<(String, u8)> {
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(max, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    got.iter().map(|d| (d.id.clone(), d.priority)).collect()
}

#[tokio::test]
async fn due_messages_come_highest_priority_first_then_in_due_and_send_order() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "prio");
    let sends = [
        ("low", at(0)),
        ("default", SendOptions::new()),
        ("high-1", at(9)),
        ("high-2", at(9)),
        // Not due for a minute: its priority must not put it ahead of anything.
        ("high-later", at(9).delay(Duration::from_secs(60))),
        ("seven", at(7)),
        ("two", at(2)),
        // Sent last but due ten seconds ago: first among the nines.
        ("high-earlier", at(9).deliver_at(now_ms() - 10_000)),
    ];
    for (id, options) in sends {
        q.send(id.as_bytes(), &options.id(id)).await.expect("send");
    }
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.ready, stats.delayed), (7, 1));
    assert!(stats.oldest_ready_lag_ms >= 10_000, "{stats:?}");
    let order = receive_all(&q, 100).await;
    let expected = [
        ("high-earlier", 9),
        ("high-1", 9),
        ("high-2", 9),
        ("seven", 7),
        ("default", DEFAULT_PRIORITY),
        ("two", 2),
        ("low", 0),
    ];
    let expected: Vec<(String, u8)> = expected.iter().map(|(i, p)| (i.to_string(), *p)).collect();
    assert_eq!(order, expected);
    assert_eq!(
        counts(&q).await,
        [1, 0, 7, 0],
        "the delayed nine is still delayed"
    );
}

#[tokio::test]
async fn a_flood_of_lower_priority_delays_a_high_one_by_one_claim_at_most() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "flood");
    // 3,000 due messages of the default priority and of the lowest, without caller ids.
    for priority in [DEFAULT_PRIORITY, 0, DEFAULT_PRIORITY] {
        let batch: Vec<Message> = (0..1000)
            .map(|i| Message::new(format!("low {i}"), at(priority)))
            .collect();
        q.send_batch(&batch).await.expect("flood");
    }
    let high = q.send(b"urgent", &at(6)).await.expect("send").id;
    let mut consumer = q.consumer().await.expect("consumer");
    let first = receive_one(&mut consumer, LEASE).await;
    assert_eq!((first.id.as_str(), first.priority), (high.as_str(), 6));
    assert_eq!(first.payload, b"urgent");
    // Then the default priority (2,000, in send order), then the lowest.
    let rest = consumer
        .receive(&receiving(1000, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(rest.len(), 1000);
    assert!(rest.iter().all(|d| d.priority == DEFAULT_PRIORITY));
    assert_eq!(rest[0].payload, b"low 0");
    assert_eq!(rest[999].payload, b"low 999");
    let rest = consumer
        .receive(&receiving(1000, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(rest[0].payload, b"low 0", "the second default batch");
    assert!(rest.iter().all(|d| d.priority == DEFAULT_PRIORITY));
    let rest = consumer
        .receive(&receiving(1000, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert!(rest.iter().all(|d| d.priority == 0));
    assert_eq!(rest.len(), 1000);
    // With no message of another priority left, claims look at one set again (from the
    // first claim that finds the other set empty).
    let none = consumer
        .receive(&receiving(1, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert!(none.is_empty());
    let levels = server.cli(&["HEXISTS", "dq:{flood}:control", "levels"]);
    assert_eq!(levels.trim(), "0");
}

#[tokio::test]
async fn a_message_keeps_its_priority_through_retry_requeue_and_reschedule() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "keeps");
    let mut consumer = q.consumer().await.expect("consumer");
    q.send(b"x", &at(8).id("x").max_attempts(2))
        .await
        .expect("send");
    let first = receive_one(&mut consumer, LEASE).await;
    // Ordinary messages arrive while x is away; x must still come before them.
    for i in 0..5 {
        q.send(format!("d{i}"), &SendOptions::new())
            .await
            .expect("send");
    }
    let outcome = q
        .nack(&first, "boom", Some(Duration::ZERO))
        .await
        .expect("nack");
    assert_eq!(outcome, NackOutcome::Retry);
    let retried = receive_one(&mut consumer, LEASE).await;
    assert_eq!(
        (retried.id.as_str(), retried.priority, retried.attempt),
        ("x", 8, 2)
    );
    assert_eq!(
        q.nack(&retried, "boom", None).await.expect("nack"),
        NackOutcome::Dead
    );
    let dead = q.dead_letters().list(0, 10).await.expect("list");
    assert_eq!((dead[0].id.as_str(), dead[0].priority), ("x", 8));
    assert!(q.dead_letters().requeue("x").await.expect("requeue"));
    let requeued = receive_one(&mut consumer, LEASE).await;
    assert_eq!((requeued.id.as_str(), requeued.priority), ("x", 8));
    q.ack(&requeued).await.expect("ack");

    // A generated id, delayed, then moved to now: its id stays, and so does its priority.
    let later = q
        .send(b"later", &at(9).delay(Duration::from_secs(600)))
        .await
        .expect("send")
        .id;
    let info = q.get(&later).await.expect("get").expect("exists");
    assert_eq!(info.priority, 9);
    q.reschedule(&later, Schedule::Now)
        .await
        .expect("reschedule");
    let moved = receive_one(&mut consumer, LEASE).await;
    assert_eq!((moved.id.as_str(), moved.priority), (later.as_str(), 9));
    assert_eq!(
        q.get(&later)
            .await
            .expect("get")
            .expect("in flight")
            .priority,
        9
    );
    // The default-priority messages come last, in send order.
    let rest = receive_all(&q, 10).await;
    assert_eq!(rest.len(), 5);
    assert!(rest.iter().all(|(_, p)| *p == DEFAULT_PRIORITY));
}

#[tokio::test]
async fn a_priority_out_of_range_is_refused_and_nothing_is_written() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "range");
    let too_high = MAX_PRIORITY + 1;
    let err = q
        .send(b"x", &at(too_high))
        .await
        .expect_err("priority 10 accepted");
    assert!(
        matches!(err, delayq::Error::Invalid(InvalidInput::Option(ref m)) if m.contains("priority")),
        "{err}"
    );
    let batch = [
        Message::new("ok", at(3)),
        Message::new("bad", at(too_high).id("b")),
    ];
    q.send_batch(&batch).await.expect_err("batch accepted");
    assert!(is_empty(&q).await);
}

/// Ordering on a queue of several partitions: each partition orders its own messages, so a
/// backlog delays a high-priority message by at most one claim per partition.
async fn each_partition_puts_high_priority_first(q: &Queue) {
    let parts = usize::from(q.partitions().await.expect("partitions"));
    let batch: Vec<Message> = (0..200)
        .map(|i| Message::new(format!("low {i}"), at(1)))
        .collect();
    q.send_batch(&batch).await.expect("flood");
    // Sent last; round robin puts one on each partition.
    for i in 0..parts {
        q.send(format!("high {i}"), &at(9)).await.expect("send");
    }
    // One receive claims from each partition in turn: its claims' results follow each
    // other, so each partition's nine must open its run of ones.
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(1000, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 200 + parts);
    let priorities: Vec<u8> = got.iter().map(|d| d.priority).collect();
    let runs: Vec<&[u8]> = priorities.chunk_by(|a, b| a == b || *b == 1).collect();
    assert_eq!(runs.len(), parts, "{priorities:?}");
    for run in runs {
        assert_eq!(run[0], 9, "{priorities:?}");
        assert!(run[1..].iter().all(|p| *p == 1), "{priorities:?}");
    }
}

#[tokio::test]
async fn each_partition_puts_high_priority_first_on_four_partitions() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("prio4", 4).await.expect("create");
    each_partition_puts_high_priority_first(&q).await;
}

#[tokio::test]
async fn priorities_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("prio6", 6).await.expect("create");
    each_partition_puts_high_priority_first(&q).await;
    // Retry, requeue and reschedule on a partition whose keys live on another node.
    let one = dq.create_queue("prio-moves", 6).await.expect("create");
    let mut consumer = one.consumer().await.expect("consumer");
    one.send(b"x", &at(8).id("x").max_attempts(1))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, LEASE).await;
    assert_eq!(d.priority, 8);
    one.nack(&d, "boom", None).await.expect("nack");
    assert!(one.dead_letters().requeue("x").await.expect("requeue"));
    let later = one
        .send(b"later", &at(9).delay(Duration::from_secs(600)))
        .await
        .expect("send")
        .id;
    one.reschedule(&later, Schedule::Now)
        .await
        .expect("reschedule");
    let mut got: Vec<(String, u8)> = Vec::new();
    for _ in 0..2 {
        let d = receive_one(&mut consumer, LEASE).await;
        got.push((d.id, d.priority));
    }
    got.sort();
    assert_eq!(got, [(later, 9), ("x".to_owned(), 8)]);
}
