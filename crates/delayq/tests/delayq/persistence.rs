//! A Redis that cannot persist (its disk full or broken) refuses every write with
//! `MISCONF`: sends and receives fail with an error worth retrying and write nothing, reads
//! go on, and once it persists again the same calls work and nothing accepted is lost.

use std::time::Duration;

use delayq::SendOptions;

use crate::common::*;

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_redis_that_cannot_persist_refuses_writes_as_retryable_and_then_recovers() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "disk");
    q.send("before", &SendOptions::new().id("before"))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");

    server.fail_persistence();
    let keys = server.cli(&["DBSIZE"]);
    let refused = q
        .send("during", &SendOptions::new().id("during"))
        .await
        .expect_err("a send while Redis cannot persist");
    assert!(refused.is_retryable(), "{refused}");
    assert!(refused.to_string().contains("MISCONF"), "{refused}");
    let receive = consumer.receive(&receiving(1, LONG, Duration::ZERO)).await;
    assert!(
        matches!(&receive, Err(e) if e.is_retryable()),
        "a receive while Redis cannot persist: {receive:?}"
    );
    // Reads go on, and nothing was written.
    assert_eq!(q.stats().await.expect("stats").ready, 1);
    assert!(q.get("during").await.expect("get").is_none());
    assert_eq!(server.cli(&["DBSIZE"]), keys);

    server.persist_again();
    q.send("during", &SendOptions::new().id("during"))
        .await
        .expect("the same send, tried again");
    let mut got = Vec::new();
    while got.len() < 2 {
        let d = receive_one(&mut consumer, LONG).await;
        q.ack(&d).await.expect("ack");
        got.push(String::from_utf8_lossy(&d.payload).into_owned());
    }
    got.sort();
    assert_eq!(got, ["before", "during"]);
}
