//! Rate limits per group: the queue's group rate limit gives each group its own token
//! bucket, a group's own limit stands in for it, and a group out of tokens waits outside
//! the rotation (the other groups flow) until its next token, when a waiting consumer is
//! woken for it without polling.

use std::time::{Duration, Instant};

use delayq::{GroupSettings, Queue, RateLimit, SendOptions, Setting};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

async fn send_to(q: &Queue, group: &str, count: usize) {
    let batch: Vec<delayq::Message> = (0..count)
        .map(|i| delayq::Message::new(format!("{group}-{i}"), SendOptions::new().group(group)))
        .collect();
    q.send_batch(&batch).await.expect("send");
}

fn own_rate(limit: Option<RateLimit>) -> GroupSettings {
    GroupSettings {
        rate_limit: Some(limit),
        ..GroupSettings::default()
    }
}

fn count_of(deliveries: &[delayq::Delivery], group: &str) -> usize {
    deliveries
        .iter()
        .filter(|d| d.group.as_deref() == Some(group))
        .count()
}

#[tokio::test]
async fn a_rate_limited_group_gets_its_burst_then_one_per_interval_while_others_flow() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "paced");
    let limit = RateLimit {
        per_second: 5,
        burst: 2,
    };
    send_to(&q, "slow", 6).await;
    send_to(&q, "free", 6).await;
    let info = q
        .groups()
        .configure("slow", own_rate(Some(limit)))
        .await
        .expect("configure");
    assert_eq!(
        (info.rate_limit, info.own_rate_limit),
        (Some(limit), Some(limit))
    );

    // One claim: the slow group's burst, and every message of the free one.
    let started = Instant::now();
    let first = claim(&q, 100).await;
    assert_eq!(count_of(&first, "slow"), 2, "the burst");
    assert_eq!(count_of(&first, "free"), 6, "the other group flows");

    // The rest of the slow group comes one per 200 ms to a consumer that waits for it.
    let mut consumer = q.consumer().await.expect("consumer");
    let mut got = 2;
    let mut times = Vec::new();
    while got < 6 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the slow group is still not delivered whole"
        );
        let more = consumer
            .receive(&receiving(10, LEASE, Duration::from_secs(5)))
            .await
            .expect("receive");
        assert!(count_of(&more, "slow") == more.len());
        for _ in &more {
            got += 1;
            times.push(started.elapsed());
        }
    }
    // Message k after the burst cannot come before k intervals have passed (10 ms of slack
    // for the clocks of this process and of Redis).
    for (k, at) in times.iter().enumerate() {
        let earliest =
            Duration::from_millis(200 * (k as u64 + 1)).saturating_sub(Duration::from_millis(10));
        assert!(
            *at >= earliest,
            "message {} came at {at:?}, before {earliest:?}",
            k + 3
        );
    }
    assert_eq!(counts(&q).await, [0, 0, 12, 0]);
}

#[tokio::test]
async fn the_queues_group_rate_limit_gives_each_group_a_bucket_and_a_groups_own_replaces_it() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "buckets");
    let each = RateLimit {
        per_second: 1,
        burst: 3,
    };
    q.configure(&[Setting::GroupRateLimit(Some(each))])
        .await
        .expect("configure");
    assert_eq!(q.stats().await.expect("stats").group_rate_limit, Some(each));
    send_to(&q, "a", 5).await;
    send_to(&q, "b", 5).await;
    send_to(&q, "c", 5).await;
    let own = RateLimit {
        per_second: 1,
        burst: 1,
    };
    q.groups()
        .configure("c", own_rate(Some(own)))
        .await
        .expect("own limit");
    let info = q.groups().get("a").await.expect("get");
    assert_eq!((info.rate_limit, info.own_rate_limit), (Some(each), None));

    // Each group its own burst: 3 of a, 3 of b, and 1 of c, whose own limit stands in.
    let first = claim(&q, 100).await;
    assert_eq!(
        (
            count_of(&first, "a"),
            count_of(&first, "b"),
            count_of(&first, "c")
        ),
        (3, 3, 1)
    );

    // Back to the queue's: c's own limit is gone, its bucket keeps what it spent.
    let info = q
        .groups()
        .configure("c", own_rate(None))
        .await
        .expect("unset");
    assert_eq!((info.rate_limit, info.own_rate_limit), (Some(each), None));

    // Lifted, everything left comes in one go, as soon as a group held for a token would
    // have had it (at most a second: a limit is at least 1 a second).
    q.configure(&[Setting::GroupRateLimit(None)])
        .await
        .expect("lift");
    assert_eq!(q.stats().await.expect("stats").group_rate_limit, None);
    let mut consumer = q.consumer().await.expect("consumer");
    let mut rest = 0;
    let started = Instant::now();
    while rest < 15 - first.len() {
        assert!(started.elapsed() < Duration::from_secs(10), "{rest} came");
        rest += consumer
            .receive(&receiving(100, LEASE, Duration::from_secs(5)))
            .await
            .expect("receive")
            .len();
    }
    assert_eq!(counts(&q).await, [0, 0, 15, 0]);
}

#[tokio::test]
async fn a_rate_limit_of_nothing_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "refused");
    for limit in [
        RateLimit {
            per_second: 0,
            burst: 1,
        },
        RateLimit {
            per_second: 1,
            burst: 0,
        },
    ] {
        assert!(q
            .configure(&[Setting::GroupRateLimit(Some(limit))])
            .await
            .is_err());
        assert!(q
            .groups()
            .configure("g", own_rate(Some(limit)))
            .await
            .is_err());
    }
    assert_eq!(q.stats().await.expect("stats").group_rate_limit, None);
    assert_eq!(q.groups().get("g").await.expect("get").rate_limit, None);
}
