//! Redis Sentinel: a client connected through the sentinels follows the master through a
//! failover, for ordinary calls and consumers' wake-ups alike, and what the replica had
//! received before the master died is all there afterwards.

use std::future::Future;
use std::time::{Duration, Instant};

use delayq::{Config, Consumer, DelayQ, Delivery, Queue, SendOptions, State};
use redis_fixture::RedisSentinel;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);
/// Failover and recovery on a loaded test machine: generous, never a measure of speed.
const FAILOVER: Duration = Duration::from_secs(60);
/// Far longer than any deadline here: a consumer that returns within one was woken.
const WAIT: Duration = Duration::from_secs(600);

/// Repeats `call` while it fails retryably (as it may while the master is being replaced),
/// failing the test after `limit` or on any other error.
async fn retrying<T, F, Fut>(limit: Duration, what: &str, mut call: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = delayq::Result<T>>,
{
    let deadline = Instant::now() + limit;
    loop {
        match call().await {
            Ok(value) => return value,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("{what}: {e} (retryable: {})", e.is_retryable()),
        }
    }
}

/// Receives from `consumer` without waiting, retrying retryable failures.
async fn receive_now(consumer: &mut Consumer, max: usize) -> Vec<Delivery> {
    let deadline = Instant::now() + FAILOVER;
    loop {
        match consumer
            .receive(&receiving(max, LEASE, Duration::ZERO))
            .await
        {
            Ok(got) => return got,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => panic!("receive: {e}"),
        }
    }
}

async fn connect(deployment: &RedisSentinel) -> DelayQ {
    let urls = deployment.sentinel_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    DelayQ::connect_sentinel(&urls, deployment.master_name(), Config::default())
        .await
        .expect("connect through the sentinels")
}

/// Sends m0..m9 to `q`, then receives and acks m0..m3.
async fn send_ten_ack_four(q: &Queue, consumer: &mut Consumer) {
    for i in 0..10 {
        q.send(format!("m{i}"), &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let got = consumer
        .receive(&receiving(4, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    let ids: Vec<&str> = got.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, ["m0", "m1", "m2", "m3"]);
    for d in &got {
        q.ack(d).await.expect("ack");
    }
}

/// After a failover: m4..m9 and `after` are ready, m0..m3 gone, and `consumer` gets all
/// seven.
async fn check_and_drain(q: &Queue, consumer: &mut Consumer) {
    for i in 0..10 {
        let id = format!("m{i}");
        let info = retrying(FAILOVER, "get", || q.get(&id)).await;
        match i {
            0..=3 => assert!(info.is_none(), "{id} was acked before the failover"),
            _ => assert_eq!(
                info.map(|m| m.state),
                Some(State::Ready),
                "{id} was on the replica before the failover"
            ),
        }
    }
    assert_eq!(counts(q).await, [0, 7, 0, 0]);
    let mut received = Vec::new();
    while received.len() < 7 {
        let got = receive_now(consumer, 10).await;
        assert!(!got.is_empty(), "only {received:?} of 7 received");
        for d in got {
            q.ack(&d).await.expect("ack");
            received.push(d.id);
        }
    }
    received.sort();
    assert_eq!(received, ["after", "m4", "m5", "m6", "m7", "m8", "m9"]);
    assert!(is_empty(q).await);
}

/// `sleeper`, whose subscription was lost with the old master, waits again and is woken by
/// a send.
async fn check_woken(deployment: &RedisSentinel, dq: &DelayQ, name: &str, mut sleeper: Consumer) {
    // The first receive resubscribes, through the sentinels, on the new master.
    assert!(receive_now(&mut sleeper, 1).await.is_empty());
    let waiting = tokio::spawn(async move {
        sleeper
            .receive(&receiving(1, LEASE, WAIT))
            .await
            .expect("receive")
    });
    let master = &deployment.nodes()[deployment.master_index()];
    wait_until(
        Duration::from_secs(10),
        "the consumer to listen on the new master",
        || async { listening(master, name) == 1 },
    )
    .await;
    queue(dq, name)
        .send(b"wake up", &SendOptions::new())
        .await
        .expect("send");
    let got = tokio::time::timeout(FAILOVER, waiting)
        .await
        .expect("the waiting consumer was woken by the send")
        .expect("consumer task");
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, b"wake up");
}

// Multi-threaded so that the client works on while the test blocks on the fixture.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_follows_the_master_when_it_dies_and_a_replica_takes_over() {
    let mut deployment = RedisSentinel::start();
    let dq = connect(&deployment).await;
    let q = queue(&dq, "sentinel-orders");
    let mut consumer = q.consumer().await.expect("consumer");
    send_ten_ack_four(&q, &mut consumer).await;
    // A consumer subscribed to another queue's wake-ups on the master that is about to die.
    let sleeper = queue(&dq, "sentinel-wake")
        .consumer()
        .await
        .expect("consumer");
    // Everything acknowledged so far has reached the replica.
    deployment.wait_for_replicas(FAILOVER);

    let old = deployment.kill_master();
    // A send made while the sentinels notice and promote the replica fails retryably until
    // the same client finds the new master by itself.
    let sending = {
        let q = q.clone();
        tokio::spawn(async move {
            let after = SendOptions::new().id("after");
            retrying(FAILOVER, "send across the failover", || {
                q.send(b"after", &after)
            })
            .await
        })
    };
    let new = tokio::task::block_in_place(|| deployment.wait_for_failover(FAILOVER));
    assert_ne!(old, new);
    sending.await.expect("send task");
    check_and_drain(&q, &mut consumer).await;
    check_woken(&deployment, &dq, "sentinel-wake", sleeper).await;

    // The old master comes back as a replica; the client stays on the new master.
    tokio::task::block_in_place(|| {
        deployment.restart(old);
        deployment.wait_for_replicas(FAILOVER);
    });
    let sent = q.send(b"later", &SendOptions::new()).await.expect("send");
    assert_eq!(
        q.get(&sent.id).await.expect("get").map(|m| m.state),
        Some(State::Ready)
    );
}

#[tokio::test]
async fn a_client_follows_the_master_when_it_is_made_a_replica() {
    let mut deployment = RedisSentinel::start();
    let dq = connect(&deployment).await;
    let q = queue(&dq, "sentinel-demoted");
    let mut consumer = q.consumer().await.expect("consumer");
    send_ten_ack_four(&q, &mut consumer).await;
    let sleeper = queue(&dq, "sentinel-demoted-wake")
        .consumer()
        .await
        .expect("consumer");
    deployment.wait_for_replicas(FAILOVER);

    // The sentinels promote the replica while the master is up; a few seconds later they
    // would make the old master a replica and close its clients' connections. Done here at
    // once and without closing anything, so the client must notice by itself: its
    // connections stay open to a server that now refuses writes.
    let old = deployment.failover();
    let new = deployment.wait_for_failover(FAILOVER);
    assert_ne!(old, new);
    let new_port = deployment.nodes()[new].port().to_string();
    deployment.nodes()[old].cli(&["REPLICAOF", "127.0.0.1", &new_port]);

    let refused = q.send(b"refused", &SendOptions::new()).await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.is_retryable() && e.to_string().contains("read only replica")),
        "a write on the demoted master is refused, retryably: {refused:?}"
    );
    let after = SendOptions::new().id("after");
    retrying(FAILOVER, "send after the failover", || {
        q.send(b"after", &after)
    })
    .await;
    check_and_drain(&q, &mut consumer).await;
    check_woken(&deployment, &dq, "sentinel-demoted-wake", sleeper).await;
}
