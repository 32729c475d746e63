//! The data format a queue's data is in, as each partition's control hash names it: data of
//! a newer format than this delayq reads (a newer version wrote it) is refused with an error
//! that names both formats, and nothing is read or written.

use std::time::Duration;

use delayq::{Error, Message, ReceiveOptions, SendOptions};

use crate::common::*;

#[track_caller]
fn assert_newer(result: Result<impl std::fmt::Debug, Error>, what: &str) {
    match result {
        Err(Error::NewerFormat { found, supported }) => {
            assert_eq!(
                (found.as_str(), supported),
                ("2", delayq::DATA_FORMAT),
                "{what}"
            );
        }
        other => panic!("{what}: {other:?}"),
    }
}

#[tokio::test]
async fn data_of_a_newer_format_is_refused_and_nothing_is_written() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "orders");
    q.send(b"a", &SendOptions::new().id("a"))
        .await
        .expect("send");
    q.send(b"b", &SendOptions::new().id("b"))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let options = ReceiveOptions {
        max: 1,
        lease: Duration::from_secs(60),
        wait: Duration::ZERO,
    };
    let held = consumer.receive(&options).await.expect("receive");
    assert_eq!(held.len(), 1);

    // A newer delayq upgraded the queue's data.
    server.cli(&["HSET", "dq:{orders}:control", "format", "2"]);
    let before = server.every_key_dumped();
    assert_newer(q.send(b"c", &SendOptions::new()).await, "send");
    assert_newer(q.get("b").await, "get");
    assert_newer(q.cancel("b").await, "cancel");
    assert_newer(q.stats().await, "stats");
    assert_newer(q.pause().await, "pause");
    assert_newer(q.ack(&held[0]).await, "ack");
    assert_newer(consumer.receive(&options).await, "receive");
    assert_newer(q.dead_letters().requeue_all().await, "requeue");
    // A batch without caller ids runs no script: a client that has not written to the queue
    // yet reads the format before its first write.
    let other = delayq::DelayQ::connect(&server.url())
        .await
        .expect("connect");
    let batch = [Message::new(b"x".to_vec(), SendOptions::new())];
    assert_newer(
        queue(&other, "orders").send_batch(&batch).await,
        "a batch without ids",
    );
    assert_eq!(server.every_key_dumped(), before, "something was written");

    // Format 1 named, as a newer delayq leaves it for older processes: all goes on.
    server.cli(&["HSET", "dq:{orders}:control", "format", "1"]);
    q.ack(&held[0]).await.expect("ack");
    queue(&other, "orders")
        .send_batch(&batch)
        .await
        .expect("a batch");
}

#[tokio::test]
async fn a_batch_without_ids_after_an_upgrade_is_refused_before_its_records_land() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "orders");
    let batch = [Message::new(b"x".to_vec(), SendOptions::new())];
    q.send_batch(&batch).await.expect("a batch");
    // This handle read the format before its first batch; the upgrade comes after.
    server.cli(&["HSET", "dq:{orders}:control", "format", "2"]);
    assert_newer(q.send_batch(&batch).await, "a batch without ids");
    server.cli(&["HDEL", "dq:{orders}:control", "format"]);
    assert_eq!(
        q.stats().await.expect("stats").ready,
        1,
        "the refused batch landed"
    );
}
