//! The per-minute history that the scripts keep: every send (one by one, and batches without
//! caller ids, which skip Lua), delivery, ack, failure and death is counted once, lateness is
//! counted per delivery, on one partition and on several, and the keys expire.

use std::time::Duration;

use delayq::{Message, SendOptions};
use redis_fixture::Reply;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// The sums over the last three minutes (a test that spans a minute's end still sees all).
async fn totals(q: &delayq::Queue) -> delayq::Minute {
    let minutes = q.history(3).await.expect("history");
    assert_eq!(minutes.len(), 3);
    assert!(minutes
        .windows(2)
        .all(|w| w[1].start_ms == w[0].start_ms + 60_000));
    let mut total = delayq::Minute::default();
    for m in &minutes {
        total.sent += m.sent;
        total.delivered += m.delivered;
        total.acked += m.acked;
        total.failed += m.failed;
        total.dead_lettered += m.dead_lettered;
        total.expired += m.expired;
        total.lateness.merge(&m.lateness);
        for (sum, n) in total.push_responses.iter_mut().zip(m.push_responses) {
            *sum += n;
        }
    }
    total
}

#[tokio::test]
async fn every_change_is_counted_once_in_its_minute() {
    let (server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("five", 5)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        // 10 one by one, 2 of them to die on their first failure; 40 in a batch without ids.
        for i in 0..10 {
            let opts = SendOptions::new().max_attempts(if i < 2 { 1 } else { 3 });
            q.send(format!("m{i}"), &opts).await.expect("send");
        }
        let batch: Vec<Message> = (0..40)
            .map(|i| Message::new(format!("b{i}"), SendOptions::new()))
            .collect();
        q.send_batch(&batch).await.expect("batch");
        // A duplicate caller id is not a new message.
        q.send("dup", &SendOptions::new().id("same"))
            .await
            .expect("send");
        q.send("dup", &SendOptions::new().id("same"))
            .await
            .expect("send");
        let mut consumer = q.consumer().await.expect("consumer");
        let mut held = Vec::new();
        while held.len() < 51 {
            let got = consumer
                .receive(&receiving(51, LEASE, Duration::from_secs(5)))
                .await
                .expect("receive");
            assert!(!got.is_empty(), "{name}: messages went missing");
            held.extend(got);
        }
        let (fail, ack): (Vec<_>, Vec<_>) = held
            .into_iter()
            .partition(|d| d.payload == b"m0" || d.payload == b"m1" || d.payload == b"m2");
        for d in &fail {
            q.nack(d, "nope", None).await.expect("nack");
        }
        q.ack_many(&ack).await.expect("ack");

        let t = totals(&q).await;
        assert_eq!(t.sent, 51, "{name}: sent");
        assert_eq!(t.delivered, 51, "{name}: delivered");
        assert_eq!(t.acked, 48, "{name}: acked");
        assert_eq!(t.failed, 3, "{name}: failed");
        assert_eq!(t.dead_lettered, 2, "{name}: dead");
        assert_eq!(t.lateness.count(), 51, "{name}: a lateness per delivery");
        let p99 = t.lateness.quantile(0.99).expect("p99");
        assert!(
            p99 < 60_000.0,
            "{name}: claimed within the test, not {p99} ms late"
        );
    }
    // Each minute's key expires (25 hours), so the history never grows without bound.
    let Ok(Reply::Array(Some(keys))) = server.command(&["KEYS", "dq:*:m:*"]) else {
        panic!("KEYS failed");
    };
    assert!(!keys.is_empty(), "no history keys");
    for key in keys {
        let Reply::Bulk(Some(key)) = key else {
            panic!("key {key:?}");
        };
        let key = String::from_utf8(key).expect("utf-8");
        let ttl = server.command(&["TTL", &key]);
        assert!(
            matches!(ttl, Ok(Reply::Int(t)) if t > 80_000 && t <= 90_000),
            "{key}: TTL {ttl:?}"
        );
    }
}

#[tokio::test]
async fn expired_messages_are_counted_on_every_partition() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("five", 5)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        for i in 0..10 {
            let opts = SendOptions::new().ttl(Duration::from_millis(50));
            q.send(format!("m{i}"), &opts).await.expect("send");
        }
        // Past their deadline: the claims that meet them expire them, as dead letters.
        tokio::time::sleep(Duration::from_millis(70)).await;
        wait_until(Duration::from_secs(10), "all ten expire", || async {
            assert!(claim(&q, 100).await.is_empty(), "{name}: delivered late");
            counts(&q).await[3] == 10
        })
        .await;
        let t = totals(&q).await;
        assert_eq!(t.expired, 10, "{name}: expired");
        assert_eq!(t.dead_lettered, 10, "{name}: dead");
        assert_eq!(t.delivered, 0, "{name}: delivered");
    }
}

#[tokio::test]
async fn lateness_shows_how_long_a_due_message_waited() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "late");
    q.send("x", &SendOptions::new()).await.expect("send");
    // Due now, claimed about 300 ms later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    q.ack(&d).await.expect("ack");
    let t = totals(&q).await;
    let p50 = t.lateness.quantile(0.5).expect("p50");
    // Bucket ends are 19 % apart: 300 ms late lands in the bucket ending in (300, 360].
    assert!((300.0..=2_000.0).contains(&p50), "p50 {p50} ms");
}

#[tokio::test]
async fn one_claim_of_messages_late_by_many_amounts_counts_each_in_its_bucket() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "spread");
    // Due 0, 100, ..., 3,000 ms ago: one claim takes all 31, late by 0 to 3 s.
    let now = now_ms();
    let batch: Vec<Message> = (0..=30u64)
        .map(|k| Message::new("x", SendOptions::new().deliver_at(now - k * 100)))
        .collect();
    q.send_batch(&batch).await.expect("batch");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(31, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(got.len(), 31);
    let t = totals(&q).await;
    assert_eq!(t.lateness.count(), 31);
    // The k-th least late is at least (k - 1) * 100 ms late; a bucket's end is at most 19 %
    // above what it holds, and the claim came within the test's few seconds.
    for (q_share, at_least) in [(0.5, 1_400.0), (0.9, 2_600.0), (1.0, 3_000.0)] {
        let v = t.lateness.quantile(q_share).expect("quantile");
        assert!(
            (at_least..=at_least * 1.19 + 5_000.0).contains(&v),
            "q{q_share}: {v} ms"
        );
    }
    let low = t.lateness.quantile(1.0 / 31.0).expect("least late");
    assert!(low < 1_000.0, "the least late message: {low} ms");
}

#[tokio::test]
async fn push_answers_reported_by_servers_add_up_in_the_minute() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("four", 4)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        q.add_push_responses(&[0, 5, 0, 1, 2, 3])
            .await
            .expect("add");
        q.add_push_responses(&[0, 2, 0, 0, 0, 0])
            .await
            .expect("add");
        q.add_push_responses(&[0; 6]).await.expect("nothing to add");
        assert_eq!(
            totals(&q).await.push_responses,
            [0, 7, 0, 1, 2, 3],
            "{name}"
        );
    }
}
