//! Rate limits: a queue limited to R deliveries a second gives out about R a second across
//! all its consumers (decided in Redis, by its clock), on one partition or spread over
//! several, and the consumers wait for tokens instead of failing or spinning.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::{Queue, RateLimit, ReceiveOptions, SendOptions};
use redis_fixture::RedisCluster;

use crate::common::*;

const LIMIT: RateLimit = RateLimit {
    per_second: 100,
    burst: 10,
};

/// Limits `q` to 100 a second, gives it far more than that, lets three consumers drain it
/// for 7 s and checks the deliveries from the second to the sixth second: 500 within 10 %.
async fn three_consumers_share_the_limit(q: &Queue) {
    q.set_rate_limit(Some(LIMIT)).await.expect("limit");
    assert_eq!(q.stats().await.expect("stats").rate_limit, Some(LIMIT));
    for chunk in 0..3 {
        let batch: Vec<delayq::Message> = (0..1000)
            .map(|i| delayq::Message::new(format!("m{chunk}-{i}"), SendOptions::new()))
            .collect();
        q.send_batch(&batch).await.expect("send");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let times = Arc::new(Mutex::new(Vec::new()));
    let mut consumers = Vec::new();
    for _ in 0..3 {
        let (q, stop, times) = (q.clone(), stop.clone(), times.clone());
        consumers.push(tokio::spawn(async move {
            let mut consumer = q.consumer().await.expect("consumer");
            let options = ReceiveOptions {
                max: 50,
                wait: Duration::from_millis(500),
                ..ReceiveOptions::default()
            };
            while !stop.load(Ordering::SeqCst) {
                let got = consumer.receive(&options).await.expect("receive");
                let now = Instant::now();
                times.lock().expect("lock").extend(got.iter().map(|_| now));
                for d in &got {
                    q.ack(d).await.expect("ack");
                }
            }
        }));
    }
    let started = Instant::now();
    wait_until(Duration::from_secs(30), "7 s of deliveries", || async {
        started.elapsed() >= Duration::from_secs(7)
    })
    .await;
    stop.store(true, Ordering::SeqCst);
    for c in consumers {
        c.await.expect("consumer task");
    }
    let counted = {
        let times = times.lock().expect("lock");
        let first = *times.iter().min().expect("something was delivered");
        let window = first + Duration::from_secs(1)..first + Duration::from_secs(6);
        times.iter().filter(|t| window.contains(t)).count()
    };
    assert!(
        (450..=550).contains(&counted),
        "{counted} deliveries in 5 s at 100/s"
    );

    // Lifted, the rest is delivered at once.
    q.set_rate_limit(None).await.expect("lift");
    assert_eq!(q.stats().await.expect("stats").rate_limit, None);
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&ReceiveOptions {
            max: 1000,
            wait: Duration::from_secs(5),
            ..ReceiveOptions::default()
        })
        .await
        .expect("receive");
    assert!(
        got.len() > 100,
        "only {} after lifting the limit",
        got.len()
    );
}

#[tokio::test]
async fn three_consumers_share_the_limit_on_one_partition() {
    let (_server, dq) = setup().await;
    three_consumers_share_the_limit(&queue(&dq, "limited")).await;
}

#[tokio::test]
async fn three_consumers_share_the_limit_on_three_partitions() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("limited3", 3).await.expect("create");
    three_consumers_share_the_limit(&q).await;
}

#[tokio::test]
async fn three_consumers_share_the_limit_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let q = dq.create_queue("limited6", 6).await.expect("create");
    three_consumers_share_the_limit(&q).await;
}

#[tokio::test]
async fn a_limit_of_nothing_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "zero");
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
        let err = q.set_rate_limit(Some(limit)).await.expect_err("refused");
        assert!(matches!(err, delayq::Error::Invalid(_)), "{err}");
    }
}
