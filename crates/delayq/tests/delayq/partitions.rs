//! Partitioned queues: one queue over several hash tags, on a single server and on a
//! three-master cluster, where the partitions must land on every master.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use delayq::{DelayQ, Message, SendOptions};
use redis_fixture::RedisCluster;

use crate::cluster::exercise_queue;
use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// The pending count of each partition of queue `name` on `server`, by hash tag.
fn pending_per_partition(server: &RedisServer, name: &str) -> BTreeMap<String, u64> {
    // Per partition, by its control hash: the pending set's members and the messages in its
    // buckets (due far ahead, scripts/buckets.lua).
    let mut out = BTreeMap::new();
    for pattern in [
        format!("dq:{{{name}}}:control"),
        format!("dq:{{{name}#*}}:control"),
    ] {
        for control in server
            .cli(&["KEYS", &pattern])
            .lines()
            .filter(|k| !k.is_empty())
        {
            let prefix = control.trim_end_matches("control");
            let set: u64 = server
                .cli(&["ZCARD", &format!("{prefix}pending")])
                .trim()
                .parse()
                .unwrap_or(0);
            let bucketed: u64 = server
                .cli(&["HGET", control, "bucketed"])
                .trim()
                .parse()
                .unwrap_or(0);
            if set + bucketed > 0 {
                out.insert(format!("{prefix}pending"), set + bucketed);
            }
        }
    }
    out
}

#[tokio::test]
async fn every_operation_works_on_a_partitioned_queue() {
    let (server, dq) = setup().await;
    let q = dq.create_queue("parted", 4).await.expect("create");
    assert_eq!(q.partitions().await.expect("partitions"), 4);
    exercise_queue(&q).await;
    // Another client learns the count from Redis.
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    assert_eq!(
        queue(&other, "parted")
            .partitions()
            .await
            .expect("partitions"),
        4
    );
    assert_eq!(
        other.queues().await.expect("queues"),
        [delayq::QueueName::new("parted").expect("name")]
    );
}

#[tokio::test]
async fn sends_without_caller_ids_spread_evenly_and_ids_find_their_partition() {
    let (server, dq) = setup().await;
    let q = dq.create_queue("spread", 4).await.expect("create");
    let hour = SendOptions::new().delay(Duration::from_secs(3600));
    let mut ids = Vec::new();
    for i in 0..200 {
        ids.push(q.send(format!("m{i}"), &hour).await.expect("send").id);
    }
    let per_partition = pending_per_partition(&server, "spread");
    assert_eq!(per_partition.len(), 4, "{per_partition:?}");
    assert!(
        per_partition.values().all(|&n| n == 50),
        "round robin over the partitions: {per_partition:?}"
    );
    // Caller ids, one by one and in a batch of mixed ids: each is found again by id, and a
    // duplicate is recognised in whichever partition the id lives.
    for i in 0..40 {
        q.send(b"x", &hour.clone().id(format!("order-{i}")))
            .await
            .expect("send");
    }
    let batch: Vec<Message> = (40..80)
        .map(|i| {
            let options = if i % 2 == 0 {
                hour.clone().id(format!("order-{i}"))
            } else {
                hour.clone()
            };
            Message::new(format!("b{i}"), options)
        })
        .collect();
    let sent = q.send_batch(&batch).await.expect("batch");
    assert_eq!(sent.len(), 40);
    for (i, s) in (40..80).zip(&sent) {
        if i % 2 == 0 {
            assert_eq!(s.id, format!("order-{i}"), "results in input order");
        }
        ids.push(s.id.clone());
    }
    let again = q
        .send(b"x", &hour.clone().id("order-7"))
        .await
        .expect("send");
    assert!(again.duplicate, "a duplicate caller id is recognised");
    ids.extend((0..40).map(|i| format!("order-{i}")));
    for id in &ids {
        let info = q.get(id).await.expect("get").expect("found by id");
        assert_eq!(&info.id, id);
    }
    assert_eq!(counts(&q).await, [280, 0, 0, 0]);
    // Every partition got some of the caller ids.
    assert!(
        pending_per_partition(&server, "spread")
            .values()
            .all(|&n| n > 50),
        "{:?}",
        pending_per_partition(&server, "spread")
    );
    // Cancel and reschedule go straight to the partition.
    for id in ids.iter().step_by(7) {
        q.reschedule(id, delayq::Schedule::Now)
            .await
            .expect("reschedule");
    }
    let rescheduled = ids.iter().step_by(7).count() as u64;
    assert_eq!(counts(&q).await, [280 - rescheduled, rescheduled, 0, 0]);
    for id in &ids {
        q.cancel(id).await.expect("cancel");
    }
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn the_partition_count_is_fixed_at_creation() {
    let (_server, dq) = setup().await;
    dq.create_queue("fixed", 3).await.expect("create");
    dq.create_queue("fixed", 3)
        .await
        .expect("the same count again");
    let refused = dq.create_queue("fixed", 5).await.err().expect("refused");
    assert!(refused.to_string().contains("already has 3"), "{refused}");
    // A queue used before it was created has one partition for good.
    let q = queue(&dq, "used");
    q.send(b"x", &SendOptions::new()).await.expect("send");
    let refused = dq.create_queue("used", 4).await.err().expect("refused");
    assert!(refused.to_string().contains("already has 1"), "{refused}");
    for bad in [0, delayq::MAX_PARTITIONS + 1] {
        let refused = dq.create_queue("other", bad).await.err().expect("refused");
        assert!(refused.to_string().contains("partitions"), "{refused}");
    }
    // Another client, with handles made before the creation, agrees.
    let (server2, dq2) = setup().await;
    let early = queue(&dq2, "late");
    let created = DelayQ::connect(&server2.url())
        .await
        .expect("connect")
        .create_queue("late", 6)
        .await
        .expect("create");
    assert_eq!(early.partitions().await.expect("partitions"), 6);
    assert_eq!(created.partitions().await.expect("partitions"), 6);
}

#[tokio::test]
async fn a_consumer_drains_every_partition_in_due_order_within_each() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("drain", 6).await.expect("create");
    let base = now_ms() + 300;
    // Due times interleave across partitions.
    let mut sent = Vec::new();
    for i in 0..120u64 {
        let at = base + (i * 37) % 400;
        let s = q
            .send(format!("{i}"), &SendOptions::new().deliver_at(at))
            .await
            .expect("send");
        sent.push(s.id);
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let mut got = Vec::new();
    while got.len() < sent.len() {
        let batch = consumer
            .receive(&receiving(10, LEASE, Duration::from_secs(5)))
            .await
            .expect("receive");
        assert!(!batch.is_empty(), "nothing within 5 s; got {}", got.len());
        let now = now_ms();
        for d in batch {
            assert!(d.due_ms <= now, "delivered before it was due");
            q.ack(&d).await.expect("ack");
            got.push(d);
        }
    }
    let unique: HashSet<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(unique.len(), sent.len(), "each message exactly once");
    // Within a partition (a generated id's sequence number modulo 6), due order.
    let mut last_due = BTreeMap::new();
    for d in &got {
        let seq: u64 =
            d.id.split_once('-')
                .expect("generated")
                .1
                .parse()
                .expect("seq");
        let last = last_due.entry(seq % 6).or_insert(0);
        assert!(d.due_ms >= *last, "out of due order within a partition");
        *last = d.due_ms;
    }
    assert_eq!(last_due.len(), 6, "every partition delivered");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_waiting_consumer_is_woken_by_a_send_to_any_partition() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("woken", 8).await.expect("create");
    let mut consumer = q.consumer().await.expect("consumer");
    for i in 0..8 {
        let producer = q.clone();
        let send = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100)).await;
            producer
                .send(format!("{i}"), &SendOptions::new())
                .await
                .expect("send")
        });
        let got = consumer
            .receive(&receiving(1, LEASE, Duration::from_secs(10)))
            .await
            .expect("receive");
        let sent = send.await.expect("send task");
        assert_eq!(got.len(), 1, "woken by send {i}");
        assert_eq!(got[0].id, sent.id);
        q.ack(&got[0]).await.expect("ack");
    }
}

#[tokio::test]
async fn receipts_and_dead_letters_span_the_partitions() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("dl", 5).await.expect("create");
    let once = SendOptions::new().max_attempts(1);
    for i in 0..30 {
        q.send(format!("{i}"), &once).await.expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let mut got = Vec::new();
    while got.len() < 30 {
        let batch = consumer
            .receive(&receiving(30, LEASE, Duration::from_secs(5)))
            .await
            .expect("receive");
        assert!(!batch.is_empty());
        got.extend(batch);
    }
    // Settled by receipt, in one batch call across partitions: extend, then nack to death.
    let receipts: Vec<delayq::Receipt> = got.iter().map(|d| d.receipt()).collect();
    let extended = q
        .extend_receipts(&receipts, LEASE * 2)
        .await
        .expect("extend");
    assert!(extended.iter().all(Option::is_some));
    for r in &receipts {
        q.nack_receipt(r, "boom", None).await.expect("nack");
    }
    let dead = q.dead_letters();
    assert_eq!(dead.count().await.expect("count"), 30);
    // Pages merge the partitions in order of death, with no gaps or repeats.
    let mut listed = Vec::new();
    for page in 0..4 {
        listed.extend(dead.list(page * 8, 8).await.expect("list"));
    }
    assert_eq!(listed.len(), 30);
    assert!(listed
        .windows(2)
        .all(|w| w[0].died_at_ms <= w[1].died_at_ms));
    let unique: HashSet<&str> = listed.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(unique.len(), 30);
    assert!(dead.requeue(&listed[0].id).await.expect("requeue one"));
    assert!(dead.purge(&listed[1].id).await.expect("purge one"));
    assert_eq!(dead.requeue_all().await.expect("requeue all"), 28);
    assert_eq!(counts(&q).await, [0, 29, 0, 0]);
    let acks: Vec<delayq::Delivery> = {
        let mut all = Vec::new();
        while all.len() < 29 {
            let batch = consumer
                .receive(&receiving(100, LEASE, Duration::from_secs(5)))
                .await
                .expect("receive");
            assert!(!batch.is_empty());
            all.extend(batch);
        }
        all
    };
    let acked = q.ack_many(&acks).await.expect("ack many");
    assert!(acked.iter().all(|a| *a));
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_worker_serves_every_partition() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("work", 4).await.expect("create");
    let (mut running, seen) =
        spawn_recording_worker(delayq::worker::WorkerBuilder::new(q.clone()).concurrency(8));
    let mut ids = HashSet::new();
    for i in 0..200 {
        ids.insert(
            q.send(format!("{i}"), &SendOptions::new())
                .await
                .expect("send")
                .id,
        );
    }
    wait_until(Duration::from_secs(20), "every message handled", || async {
        is_empty(&q).await
    })
    .await;
    running.stop();
    running.join().await;
    assert_eq!(seen.ids(), ids);
}

#[tokio::test]
async fn partitions_spread_over_the_masters_of_a_cluster() {
    let cluster = RedisCluster::start(3, 1);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("cl.parted", 6).await.expect("create");
    exercise_queue(&q).await;
    let hour = SendOptions::new().delay(Duration::from_secs(3600));
    for i in 0..60 {
        q.send(format!("{i}"), &hour).await.expect("send");
    }
    // Two partitions on each master, ten messages in each.
    for &m in &cluster.masters() {
        let per_partition = pending_per_partition(&cluster.nodes()[m], "cl.parted");
        assert_eq!(per_partition.len(), 2, "node {m}: {per_partition:?}");
        assert!(
            per_partition.values().all(|&n| n >= 10),
            "{per_partition:?}"
        );
    }
    assert_eq!(counts(&q).await[0], 61);
    let names = dq.queues().await.expect("queues on every master");
    assert!(names.iter().any(|n| n.as_str() == "cl.parted"), "{names:?}");
}
