//! Cluster mode: every key of a queue carries the hash tag `{name}`, so every script touches a
//! single slot and works against a Redis Cluster node exactly as against a standalone server.

use std::time::Duration;

use delayq::{CancelOutcome, DelayQ, Message, NackOutcome, Schedule, SendOptions, State};

use crate::common::*;
use redis_fixture::RedisCluster;

/// The queue [`exercise_all_scripts`] uses.
pub const QUEUE: &str = "cl.orders";

const LEASE: Duration = Duration::from_secs(30);

/// Runs every operation (so every script, and the consumer's blocking wait) once against
/// `dq`, checking each result. Leaves one delayed message behind.
pub async fn exercise_all_scripts(dq: &DelayQ) {
    exercise_queue(&queue(dq, QUEUE)).await;
}

/// [`exercise_all_scripts`] on queue `q`, of any number of partitions.
pub async fn exercise_queue(q: &delayq::Queue) {
    let partitioned = q.partitions().await.expect("partitions") > 1;
    let hour = Duration::from_secs(3600);

    // send, send_batch, get, stats
    q.send(b"c1", &SendOptions::new().id("c1").delay(hour))
        .await
        .expect("send");
    let batch = q
        .send_batch(&[
            Message::new("c2", SendOptions::new().id("c2")),
            Message::new("gen", SendOptions::new()),
            Message::new("c3", SendOptions::new().id("c3").max_attempts(1)),
        ])
        .await
        .expect("send batch");
    let generated = batch[1].id.clone();
    // A batch without caller ids takes the transaction path instead of the script.
    let plain = q
        .send_batch(&[Message::new("p", SendOptions::new().delay(hour))])
        .await
        .expect("send batch without caller ids");
    assert_eq!(
        q.cancel(&plain[0].id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    let c1 = q.get("c1").await.expect("get").expect("exists");
    assert_eq!(
        (c1.state, c1.payload.as_slice()),
        (State::Delayed, &b"c1"[..])
    );
    assert_eq!(counts(q).await, [1, 3, 0, 0]);

    // reschedule, cancel
    q.reschedule("c1", Schedule::Now).await.expect("reschedule");
    assert_eq!(
        q.cancel("c1").await.expect("cancel"),
        CancelOutcome::Cancelled(State::Ready)
    );

    // receive (claim), extend, ack, nack, release
    let mut consumer = q.consumer().await.expect("consumer");
    let mut got = consumer
        .receive(&receiving(10, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    let expected = ["c2", generated.as_str(), "c3"];
    if partitioned {
        // Order holds within a partition only.
        got.sort_by_key(|d| expected.iter().position(|e| *e == d.id));
    }
    let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, expected);
    let deadline = q.extend(&mut got[0], LEASE * 2).await.expect("extend");
    assert_eq!(got[0].lease_deadline_ms, deadline);
    q.ack(&got[0]).await.expect("ack");
    assert_eq!(
        q.nack(&got[1], "later", Some(hour)).await.expect("nack"),
        NackOutcome::Retry
    );
    assert_eq!(q.release(&got[2..]).await.expect("release"), [true]);
    let c3 = receive_one(&mut consumer, LEASE).await;
    assert_eq!(
        q.nack(&c3, "boom", None).await.expect("nack"),
        NackOutcome::Dead
    );
    assert_eq!(counts(q).await, [1, 0, 0, 1]);

    // dead letters: count, list, requeue, purge
    let dead = q.dead_letters();
    assert_eq!(dead.count().await.expect("count"), 1);
    let listed = dead.list(0, 10).await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(
        (listed[0].id.as_str(), listed[0].last_error.as_deref()),
        ("c3", Some("boom"))
    );
    assert!(dead.requeue("c3").await.expect("requeue"));
    let c3 = receive_one(&mut consumer, LEASE).await;
    q.nack(&c3, "boom again", None).await.expect("nack");
    assert_eq!(dead.requeue_all().await.expect("requeue all"), 1);
    let c3 = receive_one(&mut consumer, LEASE).await;
    q.nack(&c3, "boom for good", None).await.expect("nack");
    assert!(dead.purge("c3").await.expect("purge"));
    assert_eq!(dead.purge_all().await.expect("purge all"), 0);

    // A receive that has to wait: blocks on the wake-up lists until the message is due.
    q.send(
        b"soon",
        &SendOptions::new().delay(Duration::from_millis(200)),
    )
    .await
    .expect("send");
    let soon = receive_one(&mut consumer, LEASE).await;
    assert_eq!(soon.payload, b"soon");
    q.ack(&soon).await.expect("ack");

    assert_eq!(counts(q).await, [1, 0, 0, 0]);
    let left = q.get(&generated).await.expect("get").expect("exists");
    assert_eq!(left.last_error.as_deref(), Some("later"));
}

/// The server's keys, one per line of `KEYS *`.
fn keys(server: &RedisServer) -> Vec<String> {
    let all = server.cli(&["KEYS", "*"]);
    all.lines().map(str::to_owned).collect()
}

/// Indexes of all queues, each one key outside every queue's hash tag, written beside the
/// queues' scripts (never inside one): the registry of queues, and that of processes.
const GLOBAL_INDEXES: [&str; 2] = ["dq:queues", "dq:processes"];

/// Every key of the server but the global indexes carries the queue's hash tag.
fn assert_all_keys_tagged(server: &RedisServer) -> Vec<String> {
    let keys: Vec<String> = keys(server)
        .into_iter()
        .filter(|k| !GLOBAL_INDEXES.contains(&k.as_str()))
        .collect();
    assert!(!keys.is_empty(), "no keys were written");
    let tag = format!("{{{QUEUE}}}");
    for key in &keys {
        assert!(key.contains(&tag), "key {key:?} lacks the hash tag {tag}");
    }
    keys
}

#[tokio::test]
async fn every_script_works_on_a_standalone_server() {
    let (server, dq) = setup().await;
    exercise_all_scripts(&dq).await;
    assert_all_keys_tagged(&server);
}

#[tokio::test]
async fn every_script_works_on_a_cluster_node() {
    let (server, dq) = setup_with(ServerConfig::cluster()).await;
    assert!(server
        .cli(&["INFO", "cluster"])
        .contains("cluster_enabled:1"));
    exercise_all_scripts(&dq).await;

    let keys = assert_all_keys_tagged(&server);
    let slots: Vec<String> = keys
        .iter()
        .map(|key| server.cli(&["CLUSTER", "KEYSLOT", key]))
        .collect();
    assert!(
        slots.iter().all(|s| *s == slots[0]),
        "keys in several slots: {keys:?} -> {slots:?}"
    );
}

#[tokio::test]
async fn every_script_works_through_the_cluster_client() {
    let server = RedisServer::start_with(ServerConfig::cluster());
    let dq = DelayQ::connect_cluster(&[&server.url()], delayq::Config::default())
        .await
        .expect("connect to the cluster");
    exercise_all_scripts(&dq).await;
    assert_all_keys_tagged(&server);
}

/// The master that owns `queue`'s slot, and a master that does not.
fn owner_and_other(cluster: &RedisCluster, queue: &str) -> (usize, usize) {
    let owner = cluster.node_for_key(&format!("{{{queue}}}"));
    let other = cluster
        .masters()
        .into_iter()
        .find(|&m| m != owner)
        .expect("another master");
    (owner, other)
}

#[tokio::test]
async fn every_script_works_on_a_three_master_cluster_through_a_node_without_the_slot() {
    let cluster = RedisCluster::start(3, 1);
    let (owner, other) = owner_and_other(&cluster, QUEUE);
    // Only the other master is given: every call starts there and is redirected (MOVED).
    let dq = DelayQ::connect_cluster(&[&cluster.urls()[other]], delayq::Config::default())
        .await
        .expect("connect to the cluster");
    exercise_all_scripts(&dq).await;
    assert_all_keys_tagged(&cluster.nodes()[owner]);
    let strays: Vec<String> = keys(&cluster.nodes()[other])
        .into_iter()
        .filter(|k| !GLOBAL_INDEXES.contains(&k.as_str()))
        .collect();
    assert!(
        strays.is_empty(),
        "keys on a node without the slot: {strays:?}"
    );
}

#[tokio::test]
async fn a_queue_carries_on_after_its_master_fails_over() {
    let mut cluster = RedisCluster::start(3, 1);
    let (owner, other) = owner_and_other(&cluster, "failover");
    let dq = DelayQ::connect_cluster(&[&cluster.urls()[other]], delayq::Config::default())
        .await
        .expect("connect to the cluster");
    let q = queue(&dq, "failover");
    q.send(b"before", &SendOptions::new().id("before"))
        .await
        .expect("send");
    cluster.kill(owner);
    cluster.wait_for_state_ok(Duration::from_secs(30));
    assert_ne!(
        cluster.node_for_key("{failover}"),
        owner,
        "a replica took the slot over"
    );
    // Calls fail while the cluster elects; once it is ok again the same client carries on.
    wait_until(
        Duration::from_secs(20),
        "a send after the failover",
        || async {
            q.send(b"after", &SendOptions::new().id("after"))
                .await
                .is_ok()
        },
    )
    .await;
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(10, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert!(ids.contains(&"after"), "{ids:?}");
    for d in &got {
        q.ack(d).await.expect("ack");
    }
}

#[tokio::test]
async fn a_send_waits_for_the_replicas_it_asks_for() {
    // A server without replicas: the send is written, and says it was not replicated.
    let (server, dq) = setup().await;
    let q = queue(&dq, "lonely");
    let durable = SendOptions::new()
        .id("d1")
        .replicas(1, Duration::from_millis(100));
    let err = q.send(b"x", &durable).await.expect_err("not replicated");
    assert!(
        matches!(
            err,
            delayq::Error::NotReplicated {
                replicas: 0,
                wanted: 1
            }
        ),
        "{err}"
    );
    assert!(err.is_retryable());
    assert!(
        q.get("d1").await.expect("get").is_some(),
        "written all the same"
    );
    // Retried with the same id: a duplicate, still not replicated.
    assert!(q.send(b"x", &durable).await.is_err());
    assert_eq!(counts(&q).await, [0, 1, 0, 0]);
    let none_needed = SendOptions::new().replicas(0, Duration::from_millis(100));
    q.send(b"y", &none_needed)
        .await
        .expect("zero replicas asked");
    // A wait for replicas blocks its connection; other calls do not queue behind it.
    let mut monitor = server.monitor();
    let waiting = {
        let q = q.clone();
        tokio::spawn(async move {
            let slow = SendOptions::new().replicas(1, Duration::from_secs(3));
            q.send(b"slow", &slow).await
        })
    };
    // Once Redis runs the WAIT, the calls below go while it blocks.
    tokio::task::spawn_blocking(move || monitor.wait_for(&["\"WAIT\""], Duration::from_secs(10)))
        .await
        .expect("monitor task")
        .expect("the slow send's WAIT");
    for i in 0..20 {
        let sent = q
            .send(format!("{i}"), &SendOptions::new())
            .await
            .expect("send");
        q.get(&sent.id).await.expect("get").expect("there");
    }
    assert!(
        !waiting.is_finished(),
        "other calls went past the waiting send"
    );
    assert!(waiting.await.expect("task").is_err());
    for bad in [
        Duration::ZERO,
        delayq::MAX_REPLICA_WAIT + Duration::from_secs(1),
    ] {
        let err = q
            .send(b"x", &SendOptions::new().replicas(1, bad))
            .await
            .expect_err("refused");
        assert!(matches!(err, delayq::Error::Invalid(_)), "{err}");
    }

    // A cluster with a replica per master: single sends and a batch over six partitions
    // (one pipeline with WAIT per partition, each on its master's connection).
    let cluster = RedisCluster::start(3, 1);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("durable", 6).await.expect("create");
    let waited = SendOptions::new().replicas(1, Duration::from_secs(5));
    for i in 0..12 {
        q.send(format!("{i}"), &waited.clone().id(format!("w{i}")))
            .await
            .expect("send acknowledged by a replica");
    }
    let batch: Vec<Message> = (0..30)
        .map(|i| Message::new(format!("b{i}"), waited.clone()))
        .collect();
    let sent = q.send_batch(&batch).await.expect("batch acknowledged");
    assert_eq!(sent.len(), 30);
    for s in &sent {
        assert!(q.get(&s.id).await.expect("get").is_some());
    }
    // Two replicas are more than any master has.
    let too_many = SendOptions::new().replicas(2, Duration::from_millis(200));
    assert!(matches!(
        q.send(b"z", &too_many).await,
        Err(delayq::Error::NotReplicated {
            replicas: 1,
            wanted: 2
        })
    ));
    assert_eq!(counts(&q).await[1], 43);
}

/// A queue name whose slot (that of its partition 0) sits among the first slots of the second
/// master (redis-cli gives three masters 0-5460, 5461-10922, 10923-16383), so that moving
/// that master's lowest slots up to it moves the queue, keys and all; with the master that
/// owns it, another, and a client connected through the other.
struct Movable {
    name: String,
    slot: u16,
    from: usize,
    to: usize,
    dq: DelayQ,
}

impl Movable {
    async fn find(cluster: &RedisCluster, prefix: &str) -> Movable {
        let name = (0..)
            .map(|i| format!("{prefix}{i}"))
            .find(|n| (5461..5561).contains(&redis_fixture::key_slot(n)))
            .expect("a name in range");
        let slot = redis_fixture::key_slot(&name);
        let from = cluster.node_for_slot(slot);
        let to = cluster
            .masters()
            .into_iter()
            .find(|&m| m != from)
            .expect("another master");
        let dq = DelayQ::connect_cluster(&[&cluster.urls()[to]], delayq::Config::default())
            .await
            .expect("connect to the cluster");
        Movable {
            name,
            slot,
            from,
            to,
            dq,
        }
    }

    /// Moves the queue's slot to the other master with `redis-cli --cluster reshard`.
    async fn reshard(&self, cluster: RedisCluster) -> RedisCluster {
        let (from, to, count) = (self.from, self.to, usize::from(self.slot - 5461) + 1);
        let cluster = tokio::task::spawn_blocking(move || {
            cluster.reshard(from, to, count);
            cluster
        })
        .await
        .expect("reshard");
        assert_eq!(cluster.node_for_slot(self.slot), to, "the slot moved");
        cluster
    }
}

#[tokio::test]
async fn workers_follow_a_busy_partition_resharded_to_another_master() {
    let cluster = RedisCluster::start(3, 0);
    let moving = Movable::find(&cluster, "rs").await;
    let (name, from) = (&moving.name, moving.from);
    let q = moving.dq.create_queue(name, 3).await.expect("create");
    let (mut running, seen) = spawn_recording_worker(
        delayq::worker::WorkerBuilder::new(q.clone())
            .concurrency(4)
            .lease(Duration::from_secs(2)),
    );
    // Producers keep sending (due over the next second) while the slot moves.
    let producer = {
        let q = q.clone();
        tokio::spawn(async move {
            let mut acknowledged = Vec::new();
            for i in 0..1500u64 {
                let id = format!("m{i}");
                let options = SendOptions::new()
                    .id(id.clone())
                    .delay(Duration::from_millis(i % 1000));
                let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                loop {
                    match q.send(b"x", &options).await {
                        Ok(_) => break,
                        Err(e) if e.is_retryable() && tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                        Err(e) => panic!("send {id}: {e}"),
                    }
                }
                acknowledged.push(id);
                if i % 50 == 0 {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
            acknowledged
        })
    };
    wait_until(Duration::from_secs(10), "traffic under way", || async {
        seen.ids().len() >= 100
    })
    .await;
    let cluster = moving.reshard(cluster).await;
    let acknowledged = producer.await.expect("producer");
    wait_until(Duration::from_secs(30), "every message handled", || async {
        is_empty(&q).await
    })
    .await;
    running.stop();
    running.join().await;
    let seen = seen.ids();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !seen.contains(*id))
        .collect();
    assert!(
        lost.is_empty(),
        "lost {} messages: {:?}",
        lost.len(),
        &lost[..lost.len().min(10)]
    );
    // Partition 0's keys are all on the new master now.
    let left = cluster.nodes()[from].cli(&["KEYS", &format!("dq:{{{name}}}:*")]);
    assert!(left.trim().is_empty(), "keys left behind: {left}");
}

#[tokio::test]
async fn a_batch_without_ids_follows_its_slot_to_another_master() {
    // A batch without caller ids goes as a MULTI transaction to the master the client last
    // knew for the queue's slot. After a reshard, that master answers each queued command
    // with MOVED and aborts the transaction; the batch must land on the new owner.
    let cluster = RedisCluster::start(3, 0);
    let moving = Movable::find(&cluster, "mv").await;
    let q = queue(&moving.dq, &moving.name);
    let hour = Duration::from_secs(3600);
    let batch = || {
        [
            Message::new("a", SendOptions::new().delay(hour)),
            Message::new("b", SendOptions::new().delay(hour)),
        ]
    };
    q.send_batch(&batch()).await.expect("batch before the move");
    let _cluster = moving.reshard(cluster).await;
    let sent = q.send_batch(&batch()).await.expect("batch after the move");
    assert_eq!(sent.len(), 2);
    assert_eq!(q.stats().await.expect("stats").delayed, 4);
}

#[tokio::test]
async fn a_batch_refused_while_the_cluster_is_down_is_retryable() {
    // With a master dead and no replica to replace it, the cluster is down: its other masters
    // refuse every keyed command with CLUSTERDOWN, the queued commands of a transaction (a
    // batch without caller ids) included, and Redis aborts it. Nothing ran, and the batch
    // works once the cluster is whole again: a retryable error, as for a plain send.
    let mut cluster = RedisCluster::start(3, 0);
    let name = QUEUE;
    let owner = cluster.node_for_key(&format!("{{{name}}}"));
    let dead = cluster
        .masters()
        .into_iter()
        .find(|&m| m != owner)
        .expect("another master");
    let dq = DelayQ::connect_cluster(&[&cluster.urls()[owner]], delayq::Config::default())
        .await
        .expect("connect to the cluster");
    let q = queue(&dq, name);
    let batch = [
        Message::new("a", SendOptions::new()),
        Message::new("b", SendOptions::new()),
    ];
    q.send_batch(&batch).await.expect("batch while whole");
    cluster.kill(dead);
    wait_until(Duration::from_secs(30), "the cluster is down", || {
        let info = cluster.nodes()[owner].cli(&["CLUSTER", "INFO"]);
        async move { info.contains("cluster_state:fail") }
    })
    .await;
    let err = q.send_batch(&batch).await.expect_err("the cluster is down");
    assert!(err.is_retryable(), "{err}");
    let err = q
        .send(b"c", &SendOptions::new().id("c"))
        .await
        .expect_err("the cluster is down");
    assert!(err.is_retryable(), "{err}");
}
