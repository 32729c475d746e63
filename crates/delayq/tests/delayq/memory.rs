//! A Redis at `maxmemory` (with `noeviction`, as delayq requires) refuses new sends, but
//! everything that drains the queue, frees memory or only reads keeps working.

use std::time::Duration;

use delayq::{CancelOutcome, SendOptions, State};

use crate::common::*;

const LONG: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_full_redis_refuses_sends_but_the_queue_still_drains() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "full");
    let once = SendOptions::new().max_attempts(1);
    for id in ["dead", "ack", "nack", "extend", "release", "ready"] {
        q.send(id, &once.clone().id(id)).await.expect("send");
    }
    let delayed = q
        .send(
            b"later",
            &SendOptions::new()
                .id("later")
                .delay(Duration::from_secs(60)),
        )
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let mut held = consumer
        .receive(&receiving(5, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(held.len(), 5);
    let dead = held.remove(0);
    assert_eq!(dead.payload, b"dead");
    q.nack(&dead, "broken", None)
        .await
        .expect("nack to the dead letters");

    server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    server.cli(&["CONFIG", "SET", "maxmemory", "1"]);
    let refused = q.send(b"more", &SendOptions::new()).await;
    assert!(
        matches!(&refused, Err(e) if e.to_string().contains("OOM")),
        "a send into a full Redis: {refused:?}"
    );

    // Reading.
    let stats = q.stats().await.expect("stats");
    assert_eq!((stats.delayed, stats.in_flight, stats.dead), (1, 4, 1));
    assert_eq!(
        q.get(&delayed.id).await.expect("get").map(|i| i.state),
        Some(State::Delayed)
    );
    assert_eq!(q.dead_letters().count().await.expect("count"), 1);
    assert_eq!(q.dead_letters().list(0, 10).await.expect("list").len(), 1);

    // Settling what is held.
    let by_payload = |p: &[u8]| held.iter().position(|d| d.payload == p).expect("held");
    let mut to_extend = held[by_payload(b"extend")].clone();
    q.extend(&mut to_extend, LONG).await.expect("extend");
    q.ack(&held[by_payload(b"ack")]).await.expect("ack");
    q.nack(&held[by_payload(b"nack")], "failed", None)
        .await
        .expect("nack");
    let released = q
        .release(std::slice::from_ref(&held[by_payload(b"release")]))
        .await
        .expect("release");
    assert_eq!(released, [true]);
    q.ack(&to_extend).await.expect("ack");

    // Draining what is ready.
    let ready = consumer
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive from a full Redis");
    let mut payloads: Vec<&[u8]> = ready.iter().map(|d| d.payload.as_slice()).collect();
    payloads.sort();
    assert_eq!(payloads, [&b"ready"[..], b"release"]);
    q.ack_many(&ready).await.expect("ack");

    // Deleting.
    assert_eq!(
        q.cancel(&delayed.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    assert_eq!(q.dead_letters().purge_all().await.expect("purge"), 2);
    assert!(is_empty(&q).await);
}
