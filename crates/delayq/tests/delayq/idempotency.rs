//! The idempotency window: a caller id stays reserved for a while after its message is
//! acked, cancelled or its dead letter purged, so a late retry of the send is still a
//! duplicate; after the window the id is free again, and its entry is gone from Redis.

use std::time::Duration;

use delayq::{Queue, ReceiveOptions, SendOptions};
use redis_fixture::RedisCluster;

use crate::common::*;

const WINDOW: Duration = Duration::from_millis(1500);

fn by_id(id: &str) -> SendOptions {
    SendOptions::new().id(id)
}

/// Sends, receives and acks messages `ids`, all due at once.
async fn send_and_ack(q: &Queue, ids: &[String]) {
    for id in ids {
        let sent = q.send(id.as_bytes(), &by_id(id)).await.expect("send");
        assert!(!sent.duplicate, "{id} was new");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let mut left = ids.len();
    while left > 0 {
        let options = ReceiveOptions {
            max: left,
            wait: Duration::from_secs(10),
            ..ReceiveOptions::default()
        };
        let got = consumer.receive(&options).await.expect("receive");
        assert!(!got.is_empty(), "{left} messages never came");
        for d in &got {
            q.ack(d).await.expect("ack");
        }
        left -= got.len();
    }
}

/// Checks the window on `q` (empty, without a window).
async fn ids_stay_reserved_for_the_window(q: &Queue) {
    // Without a window an id is free again as soon as its message is acked.
    send_and_ack(q, &["free".to_owned()]).await;
    let again = q.send(b"again", &by_id("free")).await.expect("send");
    assert!(!again.duplicate);
    q.cancel("free").await.expect("cancel");

    q.set_idempotency_window(WINDOW)
        .await
        .expect("set the window");
    assert_eq!(q.stats().await.expect("stats").idempotency_window, WINDOW);
    let ids: Vec<String> = (0..8).map(|i| format!("close-{i}")).collect();
    send_and_ack(q, &ids).await;
    // Cancelled, and purged from the dead letters: reserved all the same.
    q.send(b"c", &by_id("cancelled").delay(Duration::from_secs(3600)))
        .await
        .expect("send");
    q.cancel("cancelled").await.expect("cancel");

    for id in ids.iter().chain([&"cancelled".to_owned()]) {
        let retry = q.send(b"late retry", &by_id(id)).await.expect("send");
        assert!(
            retry.duplicate,
            "{id}: a retry within the window is a duplicate"
        );
        assert_eq!(retry.due_ms, None);
    }
    let stats = q.stats().await.expect("stats");
    assert_eq!(
        stats.ready + stats.delayed + stats.in_flight,
        0,
        "nothing was written"
    );

    // After the window each id is free again: a send of it is new (and, once written, is
    // a duplicate again while its message exists, so each id is sent until it is new once).
    // The ids were acked one after another, so their windows end one after another too.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut reserved: Vec<&String> = ids.iter().collect();
    while !reserved.is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "still reserved long after the window: {reserved:?}"
        );
        let mut still = Vec::new();
        for id in reserved {
            if q.send(b"new", &by_id(id)).await.expect("send").duplicate {
                still.push(id);
            }
        }
        reserved = still;
        if !reserved.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn ids_stay_reserved_for_the_window_on_one_partition() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "idem");
    ids_stay_reserved_for_the_window(&q).await;
    // The ids whose window ended are forgotten by the next calls that remember others.
    q.set_idempotency_window(Duration::ZERO).await.expect("off");
    assert_eq!(
        q.stats().await.expect("stats").idempotency_window,
        Duration::ZERO
    );
    wait_until(
        Duration::from_secs(10),
        "expired ids to be forgotten",
        || async {
            q.send(b"x", &SendOptions::new()).await.expect("send");
            let mut consumer = q.consumer().await.expect("consumer");
            for d in consumer
                .receive(&ReceiveOptions {
                    max: 100,
                    ..ReceiveOptions::default()
                })
                .await
                .expect("receive")
            {
                q.ack(&d).await.expect("ack");
            }
            server.cli(&["EXISTS", "dq:{idem}:gone"]).trim() == "0"
        },
    )
    .await;
}

#[tokio::test]
async fn ids_stay_reserved_for_the_window_on_four_partitions() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("idem4", 4).await.expect("create");
    ids_stay_reserved_for_the_window(&q).await;
}

#[tokio::test]
async fn ids_stay_reserved_for_the_window_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("idem6", 6).await.expect("create");
    ids_stay_reserved_for_the_window(&q).await;
}

#[tokio::test]
async fn a_purged_dead_letter_keeps_its_id_for_the_window() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "purged");
    q.set_idempotency_window(Duration::from_secs(3600))
        .await
        .expect("window");
    let mut consumer = q.consumer().await.expect("consumer");
    let next = ReceiveOptions {
        wait: Duration::from_secs(10),
        ..ReceiveOptions::default()
    };
    q.send(b"d", &by_id("doomed").max_attempts(1))
        .await
        .expect("send");
    let got = consumer.receive(&next).await.expect("receive");
    q.nack(&got[0], "no", None).await.expect("nack");
    assert!(q.dead_letters().purge("doomed").await.expect("purge"));
    let retry = q.send(b"d", &by_id("doomed")).await.expect("send");
    assert!(retry.duplicate);
    // A generated id is never sent again, so nothing is kept for it.
    q.send(b"g", &SendOptions::new()).await.expect("send");
    let got = consumer.receive(&next).await.expect("receive");
    q.ack(&got[0]).await.expect("ack");
    let kept = server.cli(&["ZRANGE", "dq:{purged}:gone", "0", "-1"]);
    assert_eq!(kept.trim(), "doomed");
}

#[tokio::test]
async fn a_window_out_of_range_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "range");
    let err = q
        .set_idempotency_window(Duration::from_secs(400 * 86_400))
        .await
        .expect_err("too long");
    assert!(matches!(err, delayq::Error::Invalid(_)), "{err}");
}
