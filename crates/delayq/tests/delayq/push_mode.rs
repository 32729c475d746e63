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
