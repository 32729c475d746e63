//! Pause and resume: a paused queue gives no consumer a message, whatever is due, while sends
//! and the settling of messages already in flight go on; resuming wakes waiting consumers at
//! once. The state is in Redis: every client sees it, and it survives a restart.

use std::collections::HashSet;
use std::time::Duration;

use delayq::{Queue, ReceiveOptions, SendOptions};
use redis_fixture::RedisCluster;
use tokio::time::timeout;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// Checks pause and resume on `q`, which must be empty and unpaused.
async fn pause_holds_deliveries_until_resumed(q: &Queue) {
    let mut consumer = q.consumer().await.expect("consumer");
    q.send(b"before", &SendOptions::new().id("before"))
        .await
        .expect("send");
    let wait = Duration::from_secs(10);
    let held = consumer
        .receive(&ReceiveOptions {
            max: 1,
            lease: LEASE,
            wait,
        })
        .await
        .expect("receive before the pause");
    assert_eq!(held.len(), 1);

    q.pause().await.expect("pause");
    assert!(q.stats().await.expect("stats").paused);
    // Sends are accepted while paused, and are due at once.
    let ids: HashSet<String> = (0..8).map(|i| format!("p{i}")).collect();
    for id in &ids {
        q.send(id.as_bytes(), &SendOptions::new().id(id.clone()))
            .await
            .expect("send while paused");
    }
    // What was in flight settles as usual.
    q.ack(&held[0]).await.expect("ack while paused");
    // Eight messages are ready, and a receive gets none of them: it waits out its time.
    let short = ReceiveOptions {
        max: 10,
        lease: LEASE,
        wait: Duration::from_millis(300),
    };
    assert!(consumer.receive(&short).await.expect("receive").is_empty());
    assert_eq!(q.stats().await.expect("stats").ready, 8);

    // A consumer that is waiting when the queue resumes is woken then, long before its own
    // wait (10 minutes) would end.
    let long = ReceiveOptions {
        max: 10,
        lease: LEASE,
        wait: Duration::from_secs(600),
    };
    let mut waiting = Box::pin(consumer.receive(&long));
    assert!(
        timeout(Duration::from_millis(200), &mut waiting)
            .await
            .is_err(),
        "a receive on a paused queue returned"
    );
    q.resume().await.expect("resume");
    let first = timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the waiting consumer was woken by resume")
        .expect("receive");
    assert!(!first.is_empty());
    assert!(!q.stats().await.expect("stats").paused);

    // The rest follow (on a partitioned queue, from the other partitions' lanes).
    let mut got: HashSet<String> = first.iter().map(|d| d.id.clone()).collect();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < ids.len() && tokio::time::Instant::now() < deadline {
        for d in consumer
            .receive(&ReceiveOptions {
                max: 10,
                lease: LEASE,
                wait,
            })
            .await
            .expect("receive")
        {
            got.insert(d.id.clone());
        }
    }
    assert_eq!(got, ids);
}

#[tokio::test]
async fn pause_holds_deliveries_until_resumed_on_one_partition() {
    let (_server, dq) = setup().await;
    pause_holds_deliveries_until_resumed(&queue(&dq, "paused")).await;
}

#[tokio::test]
async fn pause_holds_deliveries_until_resumed_on_four_partitions() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("paused4", 4).await.expect("create");
    pause_holds_deliveries_until_resumed(&q).await;
}

#[tokio::test]
async fn pause_holds_deliveries_until_resumed_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("paused6", 6).await.expect("create");
    pause_holds_deliveries_until_resumed(&q).await;
}

#[tokio::test]
async fn a_pause_holds_for_every_client_and_across_a_restart() {
    let (mut server, dq) = setup_with(ServerConfig::appendonly()).await;
    let q = queue(&dq, "kept");
    q.send(b"x", &SendOptions::new()).await.expect("send");
    q.pause().await.expect("pause");
    // Pausing again changes nothing.
    q.pause().await.expect("pause again");
    server.kill();
    server.restart();
    let other = delayq::DelayQ::connect(&server.url())
        .await
        .expect("connect after restart");
    let q = queue(&other, "kept");
    assert!(q.stats().await.expect("stats").paused);
    let mut consumer = q.consumer().await.expect("consumer");
    let short = ReceiveOptions {
        max: 1,
        lease: LEASE,
        wait: Duration::from_millis(200),
    };
    assert!(consumer.receive(&short).await.expect("receive").is_empty());
    q.resume().await.expect("resume");
    let got = consumer
        .receive(&ReceiveOptions {
            wait: Duration::from_secs(10),
            ..short
        })
        .await
        .expect("receive");
    assert_eq!(got.len(), 1);
    // Resuming leaves nothing of the pause behind: the control hash names the data format.
    q.ack(&got[0]).await.expect("ack");
    let fields = server.cli(&["HKEYS", "dq:{kept}:control"]);
    let mut fields: Vec<&str> = fields.lines().collect();
    fields.sort();
    assert_eq!(fields, ["format", "format_since_ms"]);
}
