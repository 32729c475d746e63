//! Push delivery mode: a queue delivered by push is claimed only by push consumers (the
//! `delayq serve` runtime), never by ordinary ones; turning it off wakes the ordinary ones;
//! pausing stops push consumers too.

use std::time::Duration;

use delayq::{QueueSet, SendOptions, Setting};
use tokio::time::timeout;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_push_queue_is_claimed_only_by_push_consumers() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "pushed");
    q.configure(&[Setting::PushDelivery(true)])
        .await
        .expect("push on");
    assert!(q.stats().await.expect("stats").push);
    q.send(b"a", &SendOptions::new()).await.expect("send");
    let mut pull = q.consumer().await.expect("consumer");
    let short = receiving(10, LEASE, Duration::from_millis(300));
    assert!(pull.receive(&short).await.expect("receive").is_empty());

    let mut push = QueueSet::single(q.clone())
        .pushing()
        .consumer()
        .await
        .expect("push consumer");
    let got = push.receive(&short).await.expect("receive");
    assert_eq!(got.len(), 1);
    q.ack(&got[0]).await.expect("ack");

    // Paused, a push consumer gets nothing either.
    q.pause().await.expect("pause");
    q.send(b"b", &SendOptions::new()).await.expect("send");
    assert!(push.receive(&short).await.expect("receive").is_empty());
    q.resume().await.expect("resume");
    assert_eq!(push.receive(&short).await.expect("receive").len(), 1);

    // Back to pull: a waiting ordinary consumer is woken, and push consumers get nothing.
    q.send(b"c", &SendOptions::new()).await.expect("send");
    let long = receiving(10, LEASE, Duration::from_secs(600));
    let mut waiting = Box::pin(pull.receive(&long));
    assert!(timeout(Duration::from_millis(200), &mut waiting)
        .await
        .is_err());
    q.configure(&[Setting::PushDelivery(false)])
        .await
        .expect("push off");
    let got = timeout(Duration::from_secs(10), waiting)
        .await
        .expect("woken when push was turned off")
        .expect("receive");
    assert_eq!(got[0].payload, b"c");
    q.send(b"d", &SendOptions::new()).await.expect("send");
    assert!(push.receive(&short).await.expect("receive").is_empty());
}

#[tokio::test]
async fn a_push_target_and_every_partitions_flag_change_together_on_a_cluster() {
    let cluster = redis_fixture::RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    dq.create_queue("hooks", 6).await.expect("create");
    let q = queue(&dq, "hooks");
    assert_eq!(q.push_target().await.expect("read"), None);
    // Removing a target that is not there writes nothing and says so.
    assert!(!q.remove_push_target().await.expect("remove"));

    q.set_push_target(r#"{"url":"https://example.com"}"#)
        .await
        .expect("set");
    assert_eq!(
        q.push_target().await.expect("read").as_deref(),
        Some(r#"{"url":"https://example.com"}"#)
    );
    assert!(q.stats().await.expect("stats").push);
    // Messages on every partition are for push consumers only.
    for i in 0..12u8 {
        q.send(&[i], &SendOptions::new()).await.expect("send");
    }
    let short = receiving(12, LEASE, Duration::from_millis(300));
    let mut pull = q.consumer().await.expect("consumer");
    assert!(pull.receive(&short).await.expect("receive").is_empty());

    // A partition left unflagged (a change that failed part-way) is found and repaired.
    let other = delayq::QueueSet::single(q.clone()).pushing();
    q.configure(&[Setting::PushDelivery(false)])
        .await
        .expect("every flag off, the target still there");
    assert!(q.sync_push_delivery().await.expect("sync"));
    let mut push = other.consumer().await.expect("push consumer");
    let mut got = 0;
    while got < 12 {
        let batch = push.receive(&short).await.expect("receive");
        assert!(!batch.is_empty(), "{got} of 12 pushed");
        got += batch.len();
    }

    assert!(q.remove_push_target().await.expect("remove"));
    assert_eq!(q.push_target().await.expect("read"), None);
    assert!(!q.stats().await.expect("stats").push);
    assert!(!q.sync_push_delivery().await.expect("sync"));
}
