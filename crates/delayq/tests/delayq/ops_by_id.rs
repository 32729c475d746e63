//! Queue operations on messages by id and on the queue as a whole: cancel (which reports the
//! state it found), reschedule, get through a message's life, stats (each state, the oldest
//! ready lag, messages held past their lease), receipts, and the list of queues.

use std::time::Duration;

use delayq::{CancelOutcome, Error, NackOutcome, Receipt, Schedule, SendOptions, State};

use crate::common::*;

use crate::ops::{receive_due, state};
const HOUR: Duration = Duration::from_secs(3600);
const HOUR_MS: u64 = 3_600_000;
const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn cancel_reports_the_state_it_found() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let delayed = q
        .send(b"d", &SendOptions::new().delay(HOUR))
        .await
        .expect("send");
    let ready = q
        .send(b"r", &SendOptions::new().id("ready-1"))
        .await
        .expect("send");
    assert_eq!(
        q.cancel(&delayed.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );
    assert_eq!(
        q.cancel(&ready.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Ready)
    );
    for id in [&delayed.id, &ready.id] {
        assert_eq!(q.get(id).await.expect("get"), None);
        assert_eq!(q.cancel(id).await.expect("cancel"), CancelOutcome::NotFound);
    }
    assert!(is_empty(&q).await);

    let held = q.send(b"h", &SendOptions::new()).await.expect("send");
    let delivery = receive_due(&q).await.pop().expect("one delivery");
    assert_eq!(
        q.cancel(&held.id).await.expect("cancel"),
        CancelOutcome::NotCancelled(State::InFlight)
    );
    assert_eq!(state(&q, &held.id).await, Some(State::InFlight));
    q.ack(&delivery).await.expect("the holder still acks");
}

#[tokio::test]
async fn reschedule_moves_pending_messages_and_keeps_the_id() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");

    // Delayed (generated id) to now: ready, delivered under the same id at the new due time.
    let delayed = q
        .send(b"d", &SendOptions::new().delay(HOUR))
        .await
        .expect("send");
    let before = now_ms();
    let due = q
        .reschedule(&delayed.id, Schedule::Now)
        .await
        .expect("reschedule");
    assert!((before..=now_ms()).contains(&due));
    assert_eq!(state(&q, &delayed.id).await, Some(State::Ready));
    let delivery = receive_due(&q).await.pop().expect("one delivery");
    assert_eq!(
        (delivery.id.as_str(), delivery.due_ms),
        (delayed.id.as_str(), due)
    );

    // Ready (caller id) to an hour later, then to an absolute time.
    q.send(b"r", &SendOptions::new().id("r-1"))
        .await
        .expect("send");
    let before = now_ms();
    let due = q
        .reschedule("r-1", Schedule::After(HOUR))
        .await
        .expect("reschedule");
    assert!((before + HOUR_MS..=now_ms() + HOUR_MS).contains(&due));
    let info = q.get("r-1").await.expect("get").expect("exists");
    assert_eq!((info.state, info.due_ms), (State::Delayed, due));
    let at = now_ms() + 2 * HOUR_MS;
    assert_eq!(
        q.reschedule("r-1", Schedule::At(at))
            .await
            .expect("reschedule"),
        at
    );
    assert_eq!(q.get("r-1").await.expect("get").expect("exists").due_ms, at);

    // A rescheduled generated id stays usable for every lookup.
    let moved = q
        .send(b"m", &SendOptions::new().delay(HOUR))
        .await
        .expect("send");
    q.reschedule(&moved.id, Schedule::At(at))
        .await
        .expect("reschedule");
    assert_eq!(
        q.get(&moved.id).await.expect("get").expect("exists").due_ms,
        at
    );
    assert_eq!(
        q.cancel(&moved.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Delayed)
    );

    // In flight: wrong state; unknown: not found.
    match q.reschedule(&delivery.id, Schedule::Now).await {
        Err(Error::WrongState { id, state }) => {
            assert_eq!(
                (id.as_str(), state),
                (delivery.id.as_str(), State::InFlight)
            );
        }
        other => panic!("reschedule of an in-flight message: {other:?}"),
    }
    assert!(matches!(
        q.reschedule("nope", Schedule::Now).await,
        Err(Error::NotFound { id }) if id == "nope"
    ));
    assert_eq!(counts(&q).await, [1, 0, 1, 0]);
}

#[tokio::test]
async fn get_describes_a_message_through_its_life() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let sent = q
        .send(b"body", &SendOptions::new().id("info-1").max_attempts(7))
        .await
        .expect("send");
    let info = q.get("info-1").await.expect("get").expect("exists");
    assert_eq!(info.id, "info-1");
    assert_eq!((info.state, Some(info.due_ms)), (State::Ready, sent.due_ms));
    assert_eq!((info.attempts, info.max_attempts), (0, 7));
    assert_eq!(info.payload, b"body");
    assert_eq!(
        (info.last_error, info.lease_deadline_ms, info.died_at_ms),
        (None, None, None)
    );

    let delivery = receive_due(&q).await.pop().expect("one delivery");
    let info = q.get("info-1").await.expect("get").expect("exists");
    assert_eq!(info.state, State::InFlight);
    assert_eq!(info.attempts, 1);
    assert_eq!(info.due_ms, delivery.due_ms);
    assert_eq!(info.lease_deadline_ms, Some(delivery.lease_deadline_ms));

    q.nack(&delivery, "boom", Some(HOUR)).await.expect("nack");
    let info = q.get("info-1").await.expect("get").expect("exists");
    assert_eq!(info.state, State::Delayed);
    assert_eq!(info.attempts, 1);
    assert_eq!(info.last_error.as_deref(), Some("boom"));
    assert_eq!(info.lease_deadline_ms, None);
    assert_eq!(info.payload, b"body");

    assert_eq!(q.get("info-2").await.expect("get"), None);
}

#[tokio::test]
async fn stats_count_each_state_and_the_oldest_ready_lag() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    let s = q.stats().await.expect("stats");
    assert!(is_empty_stats(&s), "{s:?}");

    let t0 = now_ms();
    for p in ["d1", "d2"] {
        q.send(p, &SendOptions::new().delay(HOUR))
            .await
            .expect("send");
    }
    for (p, ago) in [("oldest", 5000), ("r2", 2000), ("r3", 1000)] {
        q.send(p, &SendOptions::new().deliver_at(t0 - ago).max_attempts(1))
            .await
            .expect("send");
    }
    let s = q.stats().await.expect("stats");
    assert_eq!([s.delayed, s.ready, s.in_flight, s.dead], [2, 3, 0, 0]);
    assert!(
        (5000..=now_ms() - (t0 - 5000)).contains(&s.oldest_ready_lag_ms),
        "lag {}",
        s.oldest_ready_lag_ms
    );

    // The oldest is taken and dies; the lag is now that of the next oldest.
    let mut consumer = q.consumer().await.expect("consumer");
    let oldest = receive_one(&mut consumer, LEASE).await;
    assert_eq!(oldest.payload, b"oldest");
    q.nack(&oldest, "failed", None).await.expect("nack");
    let next = receive_one(&mut consumer, LEASE).await;
    assert_eq!(next.payload, b"r2");
    let s = q.stats().await.expect("stats");
    assert_eq!([s.delayed, s.ready, s.in_flight, s.dead], [2, 1, 1, 1]);
    assert!(
        (1000..=now_ms() - (t0 - 1000)).contains(&s.oldest_ready_lag_ms),
        "lag {}",
        s.oldest_ready_lag_ms
    );
}

#[tokio::test]
async fn stats_count_messages_held_past_their_lease_and_the_oldest_overdue() {
    // A consumer takes two messages and dies holding them: they stay in flight (nothing
    // claims them back while no consumer runs), and stats say they are overdue and since
    // when, which is what an alert on stuck work needs (ready 0 and a lag of 0 hide it).
    let (_server, dq) = setup().await;
    let q = queue(&dq, "ops");
    for p in ["a", "b", "c"] {
        q.send(p, &SendOptions::new()).await.expect("send");
    }
    let mut dying = q.consumer().await.expect("consumer");
    let short = Duration::from_millis(50);
    receive_one(&mut dying, short).await;
    receive_one(&mut dying, short).await;
    let s = q.stats().await.expect("stats");
    assert_eq!([s.ready, s.in_flight], [1, 2], "{s:?}");
    let taken = now_ms();
    wait_until(
        Duration::from_secs(5),
        "the leases to be 250 ms past",
        || async {
            let s = q.stats().await.expect("stats");
            s.overdue == 2 && s.oldest_overdue_ms >= 250
        },
    )
    .await;
    let s = q.stats().await.expect("stats");
    assert_eq!([s.ready, s.in_flight, s.overdue], [1, 2, 2], "{s:?}");
    assert!(
        s.oldest_overdue_ms <= now_ms() - taken,
        "oldest overdue {} ms",
        s.oldest_overdue_ms
    );
    // A live consumer's claim takes them back: nothing is overdue any more.
    let mut live = q.consumer().await.expect("consumer");
    receive_one(&mut live, LEASE).await;
    let s = q.stats().await.expect("stats");
    assert_eq!([s.overdue, s.oldest_overdue_ms], [0, 0], "{s:?}");
    drop(dying);
}

#[tokio::test]
async fn receipts_settle_deliveries_like_the_deliveries_themselves() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "receipts");
    for i in 0..4 {
        q.send(format!("m{i}"), &SendOptions::new().id(format!("m{i}")))
            .await
            .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(4, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    let receipts: Vec<Receipt> = got
        .iter()
        .map(|d| {
            d.receipt()
                .to_string()
                .parse()
                .expect("a receipt parses back")
        })
        .collect();
    assert_eq!(receipts[0].id(), "m0");

    let deadlines = q
        .extend_receipts(&receipts, Duration::from_secs(60))
        .await
        .expect("extend");
    assert!(deadlines.iter().all(Option::is_some));
    assert_eq!(q.ack_receipts(&receipts[..1]).await.expect("ack"), [true]);
    assert_eq!(
        q.ack_receipts(&receipts[..1]).await.expect("ack"),
        [false],
        "stale"
    );
    assert_eq!(
        q.nack_receipt(&receipts[1], "failed", Some(Duration::from_secs(60)))
            .await
            .expect("nack"),
        NackOutcome::Retry
    );
    assert_eq!(
        q.release_receipts(&receipts[2..3]).await.expect("release"),
        [true]
    );
    assert!(matches!(
        q.nack_receipt(&receipts[2], "late", None).await,
        Err(Error::LeaseLost { .. })
    ));
    assert_eq!(counts(&q).await, [1, 1, 1, 0]);
    let held = consumer
        .receive(&receiving(1, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    let tampered = {
        let mut text = held[0].receipt().to_string();
        let flipped = if text.starts_with('0') { "1" } else { "0" };
        text.replace_range(..1, flipped);
        text.parse::<Receipt>().expect("well formed")
    };
    assert_eq!(q.ack_receipts(&[tampered]).await.expect("ack"), [false]);
}

#[tokio::test]
async fn queues_lists_every_queue_that_holds_messages() {
    let (_server, dq) = setup().await;
    for name in ["b-queue", "a-queue"] {
        queue(&dq, name)
            .send(b"x", &SendOptions::new())
            .await
            .expect("send");
    }
    let names: Vec<String> = dq
        .queues()
        .await
        .expect("queues")
        .iter()
        .map(|q| q.to_string())
        .collect();
    assert_eq!(names, ["a-queue", "b-queue"]);
}
