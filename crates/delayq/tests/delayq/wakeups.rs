//! Wake-ups of many queues on one connection: every consumer made from one client hears
//! its queue's wake-ups through a single push connection (one per node on a cluster), and
//! a channel nobody waits on any more is unsubscribed.

use std::time::Duration;

use delayq::{Consumer, DelayQ, Delivery, SendOptions};
use redis_fixture::RedisCluster;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);
/// Far longer than any deadline below: a consumer that returns within one was woken.
const WAIT: Duration = Duration::from_secs(600);
/// How long a woken consumer may take to return on a loaded test machine.
const WOKEN_WITHIN: Duration = Duration::from_secs(60);

/// The `ssub` count (sharded channels subscribed) of every client of `server` that has
/// any, from `CLIENT LIST`.
fn sharded_subscribers(server: &RedisServer) -> Vec<u64> {
    server
        .cli(&["CLIENT", "LIST"])
        .lines()
        .filter_map(|client| {
            client
                .split_whitespace()
                .find_map(|field| field.strip_prefix("ssub="))
                .and_then(|n| n.parse::<u64>().ok())
        })
        .filter(|&n| n > 0)
        .collect()
}

fn clients(server: &RedisServer) -> usize {
    server.cli(&["CLIENT", "LIST"]).lines().count()
}

/// A consumer of each of `names` waiting in `receive`, in a task of its own; each task
/// returns the consumer and what it received.
async fn wait_on_each(
    dq: &DelayQ,
    names: &[String],
) -> Vec<tokio::task::JoinHandle<(Consumer, Vec<Delivery>)>> {
    let mut waiting = Vec::new();
    for name in names {
        let mut consumer = queue(dq, name).consumer().await.expect("consumer");
        waiting.push(tokio::spawn(async move {
            let got = consumer
                .receive(&receiving(1, LEASE, WAIT))
                .await
                .expect("receive");
            (consumer, got)
        }));
    }
    waiting
}

/// Sends one message to each of `names` and checks that each waiting consumer returns with
/// its queue's message; the consumers, for the caller to keep or drop.
async fn send_and_collect(
    dq: &DelayQ,
    names: &[String],
    waiting: Vec<tokio::task::JoinHandle<(Consumer, Vec<Delivery>)>>,
) -> Vec<Consumer> {
    for name in names {
        queue(dq, name)
            .send(name.as_bytes(), &SendOptions::new())
            .await
            .expect("send");
    }
    let mut consumers = Vec::new();
    for (name, task) in names.iter().zip(waiting) {
        let (consumer, got) = tokio::time::timeout(WOKEN_WITHIN, task)
            .await
            .unwrap_or_else(|_| panic!("the consumer of {name} was not woken by a send"))
            .expect("consumer task");
        assert_eq!(got.len(), 1, "{name}");
        assert_eq!(got[0].payload, name.as_bytes(), "{name}");
        assert_eq!(got[0].queue.as_str(), name);
        queue(dq, name).ack(&got[0]).await.expect("ack");
        consumers.push(consumer);
    }
    consumers
}

#[tokio::test]
async fn consumers_of_many_queues_share_one_connection_and_unsubscribe_when_dropped() {
    let (server, dq) = setup().await;
    let before = clients(&server);
    let names: Vec<String> = (0..20).map(|i| format!("many-{i}")).collect();
    let waiting = wait_on_each(&dq, &names).await;
    wait_until(
        Duration::from_secs(10),
        "every consumer to listen",
        || async { names.iter().all(|name| listening(&server, name) == 1) },
    )
    .await;
    assert_eq!(
        sharded_subscribers(&server),
        [20],
        "one connection carries all 20 channels"
    );
    assert_eq!(clients(&server), before + 1, "one connection for wake-ups");

    let consumers = send_and_collect(&dq, &names, waiting).await;

    // One more consumer keeps the connection open: the others' channels are unsubscribed,
    // not merely closed with it.
    let keeper = queue(&dq, "keeper").consumer().await.expect("consumer");
    drop(consumers);
    wait_until(
        Duration::from_secs(10),
        "the dropped consumers' channels to be unsubscribed",
        || async { sharded_subscribers(&server) == [1] },
    )
    .await;
    assert!(names.iter().all(|name| listening(&server, name) == 0));
    assert_eq!(listening(&server, "keeper"), 1);

    drop(keeper);
    wait_until(
        Duration::from_secs(10),
        "the wake-up connection to close",
        || async { sharded_subscribers(&server).is_empty() && clients(&server) == before },
    )
    .await;
}

#[tokio::test]
async fn on_a_cluster_each_master_has_one_wake_up_connection_for_its_channels() {
    let cluster = RedisCluster::start(3, 0);
    let urls = cluster.urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    let dq = DelayQ::connect_cluster(&urls, delayq::Config::default())
        .await
        .expect("connect to the cluster");

    // Two queues on each master (by the slot of their wake channel).
    let masters = cluster.masters();
    let mut names: Vec<String> = Vec::new();
    let mut per_master = vec![0usize; cluster.nodes().len()];
    for i in 0.. {
        if masters.iter().all(|&m| per_master[m] >= 2) {
            break;
        }
        let name = format!("spread-{i}");
        let owner = cluster.node_for_key(&format!("dq:{{{name}}}:wake"));
        if per_master[owner] < 2 {
            per_master[owner] += 1;
            names.push(name);
        }
    }

    let waiting = wait_on_each(&dq, &names).await;
    for &m in &masters {
        let node = &cluster.nodes()[m];
        let mine: Vec<&String> = names
            .iter()
            .filter(|n| cluster.node_for_key(&format!("dq:{{{n}}}:wake")) == m)
            .collect();
        wait_until(
            Duration::from_secs(10),
            &format!("the consumers on master {m} to listen"),
            || async { mine.iter().all(|name| listening(node, name) == 1) },
        )
        .await;
        assert_eq!(
            sharded_subscribers(node),
            [2],
            "master {m}: one connection carries both of its channels"
        );
    }

    let consumers = send_and_collect(&dq, &names, waiting).await;
    drop(consumers);
    for &m in &masters {
        let node = &cluster.nodes()[m];
        wait_until(
            Duration::from_secs(10),
            &format!("master {m} to have no subscriptions left"),
            || async { sharded_subscribers(node).is_empty() },
        )
        .await;
    }
}

#[tokio::test]
async fn consumers_of_one_client_waiting_together_make_one_claim_per_message_not_one_each() {
    const CONSUMERS: usize = 8;
    const MESSAGES: u64 = 20;
    let (server, dq) = setup().await;
    let q = queue(&dq, "herd");
    server.cli(&["CONFIG", "RESETSTAT"]);
    let (done_tx, done_rx) = tokio::sync::watch::channel(false);
    let mut loops = tokio::task::JoinSet::new();
    for _ in 0..CONSUMERS {
        let (q, done) = (q.clone(), done_rx.clone());
        loops.spawn(async move {
            let mut consumer = q.consumer().await.expect("consumer");
            let mut got = Vec::new();
            while !*done.borrow() {
                let options = receiving(1, LEASE, Duration::from_millis(500));
                for d in consumer.receive(&options).await.expect("receive") {
                    q.ack(&d).await.expect("ack");
                    got.push(d.id);
                }
            }
            got
        });
    }
    // Each message comes due on its own, while all of them wait.
    for i in 0..MESSAGES {
        let options = SendOptions::new()
            .id(format!("m{i}"))
            .delay(Duration::from_millis(100));
        q.send(b"x", &options).await.expect("send");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
    wait_until(Duration::from_secs(30), "every message handled", || async {
        is_empty(&q).await
    })
    .await;
    done_tx.send(true).expect("stop the loops");
    let mut ids = Vec::new();
    while let Some(got) = loops.join_next().await {
        ids.extend(got.expect("consumer loop"));
    }
    ids.sort();
    let mut expected: Vec<String> = (0..MESSAGES).map(|i| format!("m{i}")).collect();
    expected.sort();
    assert_eq!(ids, expected, "each message once");
    // Every send and ack is a call; the rest are claims. Eight consumers that each claimed
    // when a message came due would make about eight per message (ten, measured).
    let claims = command_calls(&server, "fcall") - 2 * MESSAGES;
    assert!(
        claims <= 4 * MESSAGES,
        "{claims} claims for {MESSAGES} messages"
    );
}
