//! Leases: what receive hands out, and how ack, nack, extend and release honour (only) a
//! lease that is still valid. Expired leases are reclaimed by the next receive and count as a
//! failed attempt.

use std::time::Duration;

use delayq::{Backoff, Consumer, Delivery, Error, Queue, SendOptions, State};

use crate::common::*;

const LONG: Duration = Duration::from_secs(30);
const SHORT: Duration = Duration::from_millis(150);

/// A queue and a consumer of it on a fresh server.
async fn queue_and_consumer() -> (RedisServer, Queue, Consumer) {
    let (server, dq) = setup().await;
    let q = queue(&dq, "leases");
    let consumer = q.consumer().await.expect("consumer");
    (server, q, consumer)
}

/// Waits (by this host's clock, which the local server shares) until `delivery`'s lease has
/// passed.
async fn wait_for_expiry(delivery: &Delivery) {
    let deadline = delivery.lease_deadline_ms;
    wait_until(Duration::from_secs(5), "the lease to pass", || async move {
        now_ms() > deadline
    })
    .await;
}

fn assert_lease_lost<T: std::fmt::Debug>(what: &str, result: delayq::Result<T>, id: &str) {
    match result {
        Err(Error::LeaseLost { id: lost }) => assert_eq!(lost, id, "{what}"),
        other => panic!("{what}: expected LeaseLost, got {other:?}"),
    }
}

/// Every way of settling `stale` fails with `LeaseLost`.
async fn assert_cannot_settle(q: &Queue, stale: &Delivery) {
    let mut copy = stale.clone();
    assert_lease_lost("ack", q.ack(stale).await, &stale.id);
    assert_lease_lost("nack", q.nack(stale, "late", None).await, &stale.id);
    assert_lease_lost("extend", q.extend(&mut copy, LONG).await, &stale.id);
    assert_eq!(copy.lease_deadline_ms, stale.lease_deadline_ms);
    let released = q.release(std::slice::from_ref(stale)).await;
    assert_eq!(released.expect("release"), [false]);
}

#[tokio::test]
async fn receive_claims_due_messages_under_fresh_leases() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let mut sent = Vec::new();
    for i in 0..5 {
        sent.push(
            q.send(format!("m{i}"), &SendOptions::new())
                .await
                .expect("send"),
        );
    }
    let before = now_ms();
    let got = consumer
        .receive(&receiving(3, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let after = now_ms();

    assert_eq!(got.len(), 3, "at most max");
    for (d, s) in got.iter().zip(&sent) {
        assert_eq!((&d.id, Some(d.due_ms), d.attempt), (&s.id, s.due_ms, 1));
        let lease = LONG.as_millis() as u64;
        assert!((before + lease..=after + lease).contains(&d.lease_deadline_ms));
        let info = q.get(&d.id).await.expect("get").expect("exists");
        assert_eq!(info.lease_deadline_ms, Some(d.lease_deadline_ms));
    }
    let mut tokens: Vec<u64> = got.iter().map(Delivery::token).collect();
    tokens.sort_unstable();
    tokens.dedup();
    assert_eq!(tokens.len(), 3, "each delivery has its own token");
    assert_eq!(counts(&q).await, [0, 2, 3, 0]);

    // Another consumer gets the rest, and then nothing.
    let mut other = q.consumer().await.expect("consumer");
    let rest = other
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let ids: Vec<&str> = rest.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(ids, [sent[3].id.as_str(), sent[4].id.as_str()]);
    let none = other
        .receive(&receiving(10, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(none.is_empty());
    assert_eq!(counts(&q).await, [0, 0, 5, 0]);
}

#[tokio::test]
async fn ack_completes_a_delivery_once() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("once"))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, LONG).await;
    q.ack(&d).await.expect("ack");
    assert_eq!(q.get("once").await.expect("get"), None);
    assert!(is_empty(&q).await);
    assert_lease_lost("second ack", q.ack(&d).await, "once");
}

#[tokio::test]
async fn a_stale_token_cannot_settle_and_changes_nothing() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("send");
    let first = receive_one(&mut consumer, LONG).await;
    assert_eq!(
        q.release(std::slice::from_ref(&first))
            .await
            .expect("release"),
        [true]
    );
    let second = receive_one(&mut consumer, LONG).await;
    assert_eq!(second.id, "m");
    assert_ne!(second.token(), first.token());

    // `first` is stale although the message is in flight under a valid lease.
    assert_cannot_settle(&q, &first).await;
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.state, State::InFlight);
    assert_eq!(info.attempts, 1);
    assert_eq!(info.lease_deadline_ms, Some(second.lease_deadline_ms));
    assert_eq!(info.last_error, None);
    q.ack(&second).await.expect("the current holder acks");
}

#[tokio::test]
async fn a_lease_that_has_passed_cannot_be_settled() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("late"))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    // Not reclaimed yet (no receive since), but the holder has lost it all the same.
    assert_cannot_settle(&q, &d).await;
    assert_eq!(counts(&q).await, [0, 0, 1, 0]);
    let info = q.get("late").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::InFlight, 1));
    assert_eq!(info.last_error, None);
}

#[tokio::test]
async fn an_expired_lease_is_reclaimed_by_the_next_receive() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let options = SendOptions::new().backoff(Backoff::fixed(Duration::ZERO));
    q.send(b"x", &options.id("m")).await.expect("send");
    let first = receive_one(&mut consumer, SHORT).await;

    // The second consumer waits for the lease to expire by itself.
    let mut other = q.consumer().await.expect("consumer");
    let second = receive_one(&mut other, LONG).await;
    assert_eq!((second.id.as_str(), second.attempt), ("m", 2));
    assert!(now_ms() >= first.lease_deadline_ms);
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.attempts, 2);
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));

    assert_lease_lost("ack by the first holder", q.ack(&first).await, "m");
    q.ack(&second).await.expect("ack by the second holder");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn an_expired_lease_is_retried_by_backoff() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    let backoff = Backoff::fixed(Duration::from_secs(10));
    q.send(b"x", &SendOptions::new().id("m").backoff(backoff))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    let got = consumer
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let after = now_ms();
    assert!(got.is_empty(), "the retry waits for its backoff");
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::Delayed, 1));
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
    let low = d.lease_deadline_ms + 10_000;
    assert!(
        (low..=after + 10_000).contains(&info.due_ms),
        "due {} outside [{low}, {}]",
        info.due_ms,
        after + 10_000
    );
}

#[tokio::test]
async fn an_expired_lease_on_the_last_attempt_makes_a_dead_letter() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m").max_attempts(1))
        .await
        .expect("send");
    let d = receive_one(&mut consumer, SHORT).await;
    wait_for_expiry(&d).await;

    let got = consumer
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty());
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::Dead, 1));
    assert_eq!(info.last_error.as_deref(), Some("lease expired"));
    assert_eq!(counts(&q).await, [0, 0, 0, 1]);
}

#[tokio::test]
async fn extend_pushes_the_lease_deadline() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    q.send(b"x", &SendOptions::new().id("m"))
        .await
        .expect("send");
    let mut d = receive_one(&mut consumer, Duration::from_secs(1)).await;
    let original = d.clone();

    let before = now_ms();
    let deadline = q.extend(&mut d, LONG).await.expect("extend");
    let lease = LONG.as_millis() as u64;
    assert!((before + lease..=now_ms() + lease).contains(&deadline));
    assert_eq!(d.lease_deadline_ms, deadline);
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.lease_deadline_ms, Some(deadline));

    // Past the original deadline nobody can reclaim it, and the holder still acks.
    wait_for_expiry(&original).await;
    let mut other = q.consumer().await.expect("consumer");
    let got = other
        .receive(&receiving(1, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty(), "an extended lease is not reclaimed");
    q.ack(&d).await.expect("ack after the original deadline");
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn release_hands_messages_back_without_counting_the_attempt() {
    let (_server, q, mut consumer) = queue_and_consumer().await;
    for id in ["r1", "r2"] {
        q.send(id, &SendOptions::new().id(id).max_attempts(1))
            .await
            .expect("send");
    }
    let got = consumer
        .receive(&receiving(2, LONG, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 2);
    assert_eq!(q.release(&got).await.expect("release"), [true, true]);
    assert_eq!(counts(&q).await, [0, 2, 0, 0]);
    for id in ["r1", "r2"] {
        let info = q.get(id).await.expect("get").expect("exists");
        assert_eq!((info.state, info.attempts), (State::Ready, 0));
    }

    let again = consumer
        .receive(&receiving(2, LONG, Duration::ZERO))
        .await
        .expect("receive");
    let attempts: Vec<(&str, u32)> = again.iter().map(|d| (d.id.as_str(), d.attempt)).collect();
    assert_eq!(attempts, [("r1", 1), ("r2", 1)]);
}
