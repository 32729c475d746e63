//! The list of queues comes from a registry kept as queues are first used, not from a walk
//! of the keyspace: its cost grows with the queues, not with the messages. Queues made by a
//! version without the registry are found by one walk, once.

use delayq::{DelayQ, SendOptions};
use redis_fixture::RedisServer;

use crate::common::*;

/// How many SCANs the server has run.
fn scans(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_scan:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

async fn names(dq: &DelayQ) -> Vec<String> {
    dq.queues()
        .await
        .expect("queues")
        .iter()
        .map(|q| q.to_string())
        .collect()
}

#[tokio::test]
async fn listing_queues_reads_the_registry_not_the_keyspace() {
    let (server, dq) = setup().await;
    for name in ["c", "a", "b"] {
        queue(&dq, name)
            .send(b"x", &SendOptions::new())
            .await
            .expect("send");
    }
    // Thousands of messages in one of them make no difference to a listing.
    let many: Vec<_> = (0..2000)
        .map(|_| delayq::Message::new(b"y".to_vec(), SendOptions::new()))
        .collect();
    queue(&dq, "a")
        .send_batch(&many[..1000])
        .await
        .expect("batch");
    queue(&dq, "a")
        .send_batch(&many[1000..])
        .await
        .expect("batch");
    assert_eq!(names(&dq).await, ["a", "b", "c"]);
    let before = scans(&server);
    for _ in 0..3 {
        assert_eq!(names(&dq).await, ["a", "b", "c"]);
    }
    assert_eq!(scans(&server), before, "a listing walked the keyspace");
    // A queue made through another client is listed too.
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    other.create_queue("d", 2).await.expect("create");
    assert_eq!(names(&dq).await, ["a", "b", "c", "d"]);
    assert_eq!(scans(&server), before);
}

#[tokio::test]
async fn queues_from_before_the_registry_are_found_by_one_walk() {
    let server = RedisServer::start();
    // Data as an older delayq left it: a queue with a partition count, one from before
    // partitions (its sequence key only), and no registry.
    server.cli(&["SET", "dq:{legacy}:partitions", "1"]);
    server.cli(&["SET", "dq:{legacy}:seq", "7"]);
    server.cli(&["SET", "dq:{older}:seq", "3"]);
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    queue(&dq, "new")
        .send(b"x", &SendOptions::new())
        .await
        .expect("send");
    assert_eq!(names(&dq).await, ["legacy", "new", "older"]);
    let walked = scans(&server);
    assert!(walked > 0, "the old queues were found by a walk");
    assert_eq!(names(&dq).await, ["legacy", "new", "older"]);
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    assert_eq!(names(&other).await, ["legacy", "new", "older"]);
    assert_eq!(scans(&server), walked, "one walk, by whoever listed first");
    let legacy = queue(&dq, "legacy");
    assert_eq!(legacy.partitions().await.expect("partitions"), 1);
}
