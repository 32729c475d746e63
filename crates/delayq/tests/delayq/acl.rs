//! A Redis ACL user limited to delayq's keys and channels (`~dq:* &dq:*`) can do everything
//! delayq does: the README documents this line.

use std::time::Duration;

use delayq::{DelayQ, Message, SendOptions};

use crate::common::*;

/// The ACL the README gives for delayq's user.
pub const ACL: &[&str] = &[
    "on",
    ">a-long-secret-password",
    "~dq:*",
    "&dq:*",
    "+@all",
    "-@dangerous",
];

#[tokio::test]
async fn a_user_limited_to_delayq_keys_can_do_every_operation() {
    let server = RedisServer::start();
    let mut setuser = vec!["ACL", "SETUSER", "delayq"];
    setuser.extend_from_slice(ACL);
    server.cli(&setuser);
    // The user cannot touch anything else.
    let url = format!(
        "redis://delayq:a-long-secret-password@127.0.0.1:{}/",
        server.port()
    );
    let raw = redis::Client::open(url.as_str()).expect("client");
    let mut conn = raw
        .get_multiplexed_async_connection()
        .await
        .expect("connect as delayq");
    let other: redis::RedisResult<()> = redis::cmd("SET")
        .arg("other:key")
        .arg(1)
        .query_async(&mut conn)
        .await;
    assert!(other.is_err(), "the ACL is not limited to dq:*");

    let dq = DelayQ::connect(&url).await.expect("connect as delayq");
    let q = queue(&dq, "acl");
    q.send(b"one", &SendOptions::new().id("one").max_attempts(1))
        .await
        .expect("send");
    q.send_batch(&[
        Message::new("two", SendOptions::new()),
        Message::new("three", SendOptions::new()),
    ])
    .await
    .expect("batch without ids (MULTI)");
    q.send(
        b"later",
        &SendOptions::new()
            .id("later")
            .delay(Duration::from_secs(60)),
    )
    .await
    .expect("send");
    q.reschedule("later", delayq::Schedule::After(Duration::from_secs(120)))
        .await
        .expect("reschedule");
    assert!(q.get("later").await.expect("get").is_some());
    let mut consumer = q.consumer().await.expect("consumer (subscription)");
    let mut got = consumer
        .receive(&receiving(
            3,
            Duration::from_secs(30),
            Duration::from_secs(1),
        ))
        .await
        .expect("receive");
    assert_eq!(got.len(), 3);
    q.extend(&mut got[1], Duration::from_secs(60))
        .await
        .expect("extend");
    q.release(&got[2..]).await.expect("release");
    q.ack(&got[1]).await.expect("ack");
    q.nack(&got[0], "boom", None).await.expect("nack to dead");
    let dead = q.dead_letters();
    assert_eq!(dead.count().await.expect("count"), 1);
    assert_eq!(dead.list(0, 10).await.expect("list").len(), 1);
    assert!(dead.requeue("one").await.expect("requeue"));
    let again = consumer
        .receive(&receiving(10, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    let one = again
        .iter()
        .find(|d| d.id == "one")
        .expect("the requeued message");
    q.nack(one, "boom", None).await.expect("nack");
    assert_eq!(dead.purge_all().await.expect("purge"), 1);
    q.cancel("later").await.expect("cancel");
    q.stats().await.expect("stats");
    assert_eq!(dq.queues().await.expect("queues (SCAN)").len(), 1);

    // A wake-up reaches a consumer through the user's channel permission (a send made
    // before the consumer waits is found by its claim instead, which the assertion allows).
    let waiting = tokio::spawn(async move {
        consumer
            .receive(&receiving(
                1,
                Duration::from_secs(30),
                Duration::from_secs(5),
            ))
            .await
            .expect("receive")
    });
    q.send(b"wake", &SendOptions::new()).await.expect("send");
    let woken = waiting.await.expect("task");
    assert!(!woken.is_empty());
}
