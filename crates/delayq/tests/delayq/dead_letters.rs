//! Retries and dead letters: nack schedules the next attempt by the message's backoff (or the
//! caller's retry-after); after the last attempt the message is a dead letter, which can be
//! listed, requeued and purged.

use std::time::Duration;

use delayq::{
    Amend, Backoff, CancelOutcome, Delivery, Error, Message, MessageInfo, NackOutcome, Next, Queue,
    Schedule, SendOptions, State, MAX_BATCH,
};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// A queue on a fresh server.
pub(crate) async fn fresh_queue() -> (RedisServer, Queue) {
    let (server, dq) = setup().await;
    let q = queue(&dq, "retries");
    (server, q)
}

/// Nacks `d` (a failed attempt that will be retried) and checks that the message is due
/// `expected_ms` after the nack, by the server's clock. Returns the message as it is now.
async fn assert_retried_after(
    q: &Queue,
    d: &Delivery,
    retry_after: Option<Duration>,
    expected_ms: u64,
) -> MessageInfo {
    let before = now_ms();
    let outcome = q.nack(d, "failed", retry_after).await.expect("nack");
    let after = now_ms();
    assert_eq!(outcome, NackOutcome::Retry);
    let info = q.get(&d.id).await.expect("get").expect("exists");
    assert_eq!(info.state, State::Delayed);
    let (low, high) = (before + expected_ms, after + expected_ms);
    assert!(
        (low..=high).contains(&info.due_ms),
        "attempt {}: due {} outside [{low}, {high}]",
        d.attempt,
        info.due_ms
    );
    info
}

/// Receives `id` again without waiting for its retry: moves it to now first.
async fn redeliver_now(q: &Queue, consumer: &mut delayq::Consumer, id: &str) -> Delivery {
    q.reschedule(id, Schedule::Now).await.expect("reschedule");
    let d = receive_one(consumer, LEASE).await;
    assert_eq!(d.id, id);
    d
}

/// Fails `id` on every attempt (retrying at once) until it is dead; `errors` are the error
/// texts of each attempt.
pub(crate) async fn fail_until_dead(q: &Queue, consumer: &mut delayq::Consumer, errors: &[&str]) {
    for (i, error) in errors.iter().enumerate() {
        let d = receive_one(consumer, LEASE).await;
        assert_eq!(d.attempt as usize, i + 1);
        let outcome = q.nack(&d, error, Some(Duration::ZERO)).await.expect("nack");
        let last = i + 1 == errors.len();
        let expected = if last {
            NackOutcome::Dead
        } else {
            NackOutcome::Retry
        };
        assert_eq!(outcome, expected, "attempt {}", i + 1);
    }
}

/// Sends `n` messages with a single attempt each.
async fn send_single_attempt(q: &Queue, n: usize) {
    let messages: Vec<Message> = (0..n)
        .map(|i| Message::new(format!("m{i}"), SendOptions::new().max_attempts(1)))
        .collect();
    for chunk in messages.chunks(MAX_BATCH) {
        q.send_batch(chunk).await.expect("send batch");
    }
}

/// Takes all `n` ready messages under a short lease and lets the leases expire; the receives
/// that reclaim them make them dead letters.
async fn let_all_die(q: &Queue, n: u64) {
    let mut consumer = q.consumer().await.expect("consumer");
    let take = receiving(MAX_BATCH, Duration::from_millis(300), Duration::ZERO);
    let mut last_deadline = 0;
    while q.stats().await.expect("stats").ready > 0 {
        let got = consumer.receive(&take).await.expect("receive");
        let last = got.last().expect("ready messages are delivered");
        last_deadline = last.lease_deadline_ms;
    }
    wait_until(
        Duration::from_secs(5),
        "the leases to pass",
        || async move { now_ms() > last_deadline },
    )
    .await;
    // Each receive reclaims a bounded number of expired leases.
    for _ in 0..n / 100 + 2 {
        if q.dead_letters().count().await.expect("count") == n {
            break;
        }
        let got = consumer.receive(&take).await.expect("receive");
        assert!(got.is_empty(), "a message with one attempt came back");
    }
    assert_eq!(counts(q).await, [0, 0, 0, n]);
}

#[tokio::test]
async fn retry_after_overrides_the_backoff() {
    let (_server, q) = fresh_queue().await;
    let backoff = Backoff::fixed(Duration::from_secs(3600));
    q.send(b"x", &SendOptions::new().id("m").backoff(backoff))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let d = receive_one(&mut consumer, LEASE).await;
    let info = assert_retried_after(&q, &d, Some(Duration::from_secs(5)), 5000).await;
    assert_eq!(info.attempts, 1);
    assert_eq!(info.last_error.as_deref(), Some("failed"));
}

#[tokio::test]
async fn a_failure_can_be_dead_now_or_retried_after_a_given_time() {
    let (_server, q) = fresh_queue().await;
    let options = SendOptions::new().max_attempts(5);
    q.send(b"x", &options.clone().id("permanent"))
        .await
        .expect("send");
    q.send(b"x", &options.id("throttled")).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(2, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    for d in &got {
        let before = now_ms();
        let (next, expected) = if d.id == "permanent" {
            (Next::Dead, NackOutcome::Dead)
        } else {
            (Next::After(Duration::from_secs(90)), NackOutcome::Retry)
        };
        let outcome = q.fail(d, "upstream says no", next).await.expect("fail");
        assert_eq!(outcome, expected, "{}", d.id);
        let info = q.get(&d.id).await.expect("get").expect("kept");
        assert_eq!(info.attempts, 1);
        assert_eq!(info.last_error.as_deref(), Some("upstream says no"));
        if d.id == "permanent" {
            assert_eq!(info.state, State::Dead, "dead with four attempts left");
        } else {
            assert_eq!(info.state, State::Delayed);
            let after = info.due_ms - before;
            assert!(
                (90_000..91_000).contains(&after),
                "retried {after} ms later"
            );
        }
    }
    assert_eq!(q.dead_letters().count().await.expect("count"), 1);
}

#[tokio::test]
async fn a_failure_can_amend_the_payload_and_the_attempts_allowed() {
    let (_server, q) = fresh_queue().await;
    let options = SendOptions::new().max_attempts(3);
    q.send(b"v1", &options.clone().id("a")).await.expect("send");
    q.send(b"x", &options.id("b")).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(2, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    let (a, b) = if got[0].id == "a" {
        (&got[0], &got[1])
    } else {
        (&got[1], &got[0])
    };

    let huge = Amend::default().payload(vec![0u8; 2 * 1024 * 1024]);
    let refused = q.fail_amended(a, "e", Next::Backoff, &huge).await;
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");

    let amend = Amend::default().payload("v2").extra_attempts(10);
    let outcome = q
        .fail_amended(a, "e", Next::Backoff, &amend)
        .await
        .expect("fail");
    assert_eq!(outcome, NackOutcome::Retry);
    let info = q.get("a").await.expect("get").expect("kept");
    assert_eq!(
        (info.payload.as_slice(), info.max_attempts),
        (b"v2".as_slice(), 13)
    );

    // Fewer attempts than already made: none left, a dead letter now.
    let fewer = Amend::default().extra_attempts(-10);
    let outcome = q
        .fail_amended(b, "e", Next::Backoff, &fewer)
        .await
        .expect("fail");
    assert_eq!(outcome, NackOutcome::Dead);
    let info = q.get("b").await.expect("get").expect("kept");
    assert_eq!(
        (info.state, info.attempts, info.max_attempts),
        (State::Dead, 1, 1)
    );
}

#[tokio::test]
async fn fixed_backoff_waits_the_same_before_every_retry() {
    let (_server, q) = fresh_queue().await;
    let backoff = Backoff::fixed(Duration::from_secs(7));
    q.send(b"x", &SendOptions::new().id("m").backoff(backoff))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let mut d = receive_one(&mut consumer, LEASE).await;
    for attempt in 1..=3 {
        assert_eq!(d.attempt, attempt);
        assert_retried_after(&q, &d, None, 7000).await;
        d = redeliver_now(&q, &mut consumer, "m").await;
    }
}

#[tokio::test]
async fn exponential_backoff_grows_by_its_factor_up_to_the_cap() {
    let (_server, q) = fresh_queue().await;
    let backoff = Backoff::exponential(Duration::from_secs(10), Duration::from_secs(60))
        .with_factor(3)
        .with_jitter(0);
    let options = SendOptions::new().id("m").backoff(backoff).max_attempts(10);
    q.send(b"x", &options).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let mut d = receive_one(&mut consumer, LEASE).await;
    for expected in [10_000, 30_000, 60_000, 60_000] {
        assert_retried_after(&q, &d, None, expected).await;
        d = redeliver_now(&q, &mut consumer, "m").await;
    }
    assert_eq!(d.attempt, 5);
}

/// Fails message `m` (sent with `backoff`) once per expected delay, checking each retry's due
/// time, and redelivers it at once in between.
async fn assert_retry_delays(backoff: Backoff, expected_ms: &[u64]) {
    let (_server, q) = fresh_queue().await;
    let options = SendOptions::new().id("m").backoff(backoff).max_attempts(20);
    q.send(b"x", &options).await.expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let mut d = receive_one(&mut consumer, LEASE).await;
    for expected in expected_ms {
        assert_retried_after(&q, &d, None, *expected).await;
        d = redeliver_now(&q, &mut consumer, "m").await;
    }
}

#[tokio::test]
async fn linear_backoff_grows_by_its_base_up_to_the_cap() {
    let backoff = Backoff::linear(Duration::from_secs(10), Duration::from_secs(35));
    assert_retry_delays(backoff, &[10_000, 20_000, 30_000, 35_000, 35_000]).await;
}

#[tokio::test]
async fn a_list_backoff_waits_each_listed_delay_then_repeats_the_last() {
    let backoff = Backoff::steps(&[
        Duration::from_secs(30),
        Duration::from_secs(120),
        Duration::from_secs(600),
    ]);
    assert_retry_delays(backoff, &[30_000, 120_000, 600_000, 600_000, 600_000]).await;
}

#[tokio::test]
async fn every_kind_of_backoff_takes_jitter() {
    let (_server, q) = fresh_queue().await;
    let full = Duration::from_secs(100);
    let kinds = [
        ("fixed", Backoff::fixed(full)),
        ("linear", Backoff::linear(full, full * 10)),
        ("list", Backoff::steps(&[full, full * 2])),
    ];
    let mut consumer = q.consumer().await.expect("consumer");
    for (kind, backoff) in kinds {
        for i in 0..5 {
            let options = SendOptions::new()
                .id(format!("{kind}{i}"))
                .backoff(backoff.with_jitter(50));
            q.send(b"x", &options).await.expect("send");
        }
        let got = consumer
            .receive(&receiving(5, LEASE, Duration::ZERO))
            .await
            .expect("receive");
        assert_eq!(got.len(), 5);
        let mut shortened = 0;
        for d in &got {
            let before = now_ms();
            q.nack(d, "failed", None).await.expect("nack");
            let after = now_ms();
            let due = q.get(&d.id).await.expect("get").expect("exists").due_ms;
            assert!(
                (before + 50_000..=after + 100_000).contains(&due),
                "{}: due {due} is not 50-100 s after the nack",
                d.id
            );
            if due + 1000 < before + 100_000 {
                shortened += 1;
            }
        }
        // Uniform over 50 s: five retries all within 1 s of the full delay is (1/50)^5.
        assert!(shortened > 0, "{kind}: jitter never shortened a retry");
    }
}

#[tokio::test]
async fn jitter_shortens_retries_within_its_percentage() {
    let (_server, q) = fresh_queue().await;
    // Default policy: 1 s before the first retry, shortened by up to 10 %.
    q.send(b"x", &SendOptions::new().id("default"))
        .await
        .expect("send");
    let jittered =
        Backoff::exponential(Duration::from_secs(100), Duration::from_secs(3600)).with_jitter(50);
    for i in 0..10 {
        q.send(
            b"x",
            &SendOptions::new().id(format!("j{i}")).backoff(jittered),
        )
        .await
        .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(11, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 11);

    let mut shortened = 0;
    for d in &got {
        let full = if d.id == "default" { 1000 } else { 100_000 };
        let before = now_ms();
        q.nack(d, "failed", None).await.expect("nack");
        let after = now_ms();
        let due = q.get(&d.id).await.expect("get").expect("exists").due_ms;
        let shortest = full - full * if d.id == "default" { 10 } else { 50 } / 100;
        assert!(
            (before + shortest..=after + full).contains(&due),
            "{}: due {due} outside [{}, {}]",
            d.id,
            before + shortest,
            after + full
        );
        if d.id != "default" && due + 1000 < before + full {
            shortened += 1;
        }
    }
    // Uniform jitter over 50 s: all ten within 1 s of the full delay is vanishingly unlikely.
    assert!(
        shortened > 0,
        "jitter never shortened a retry by more than 1 s"
    );
}

#[tokio::test]
async fn the_last_failed_attempt_makes_a_dead_letter() {
    let (_server, q) = fresh_queue().await;
    q.send(b"body", &SendOptions::new().id("m").max_attempts(3))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    let before = now_ms();
    fail_until_dead(&q, &mut consumer, &["first", "second", "third"]).await;
    let after = now_ms();

    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(info.state, State::Dead);
    assert_eq!((info.attempts, info.max_attempts), (3, 3));
    assert_eq!(info.last_error.as_deref(), Some("third"));
    assert_eq!(info.lease_deadline_ms, None);
    let died = info.died_at_ms.expect("a dead letter has a time of death");
    assert!((before..=after).contains(&died));
    assert_eq!(counts(&q).await, [0, 0, 0, 1]);

    let dead = q.dead_letters();
    assert_eq!(dead.count().await.expect("count"), 1);
    let listed = dead.list(0, 10).await.expect("list");
    assert_eq!(listed.len(), 1);
    let letter = &listed[0];
    assert_eq!((letter.id.as_str(), letter.died_at_ms), ("m", died));
    assert_eq!((letter.attempts, letter.max_attempts), (3, 3));
    assert_eq!(letter.last_error.as_deref(), Some("third"));
    assert_eq!(letter.payload, b"body");
    // Nothing is delivered any more.
    let got = consumer
        .receive(&receiving(1, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert!(got.is_empty());
}

#[tokio::test]
async fn dead_letters_are_listed_in_pages_oldest_first() {
    let (_server, q) = fresh_queue().await;
    // Ids in reverse alphabetical order, so that the listing cannot be by id.
    let ids = ["e", "d", "c", "b", "a"];
    for id in ids {
        q.send(id, &SendOptions::new().id(id).max_attempts(1))
            .await
            .expect("send");
    }
    let mut consumer = q.consumer().await.expect("consumer");
    let got = consumer
        .receive(&receiving(5, LEASE, Duration::ZERO))
        .await
        .expect("receive");
    assert_eq!(got.len(), 5);
    for d in &got {
        assert_eq!(q.nack(d, "x", None).await.expect("nack"), NackOutcome::Dead);
        // The next death gets a later time.
        let died = q.get(&d.id).await.expect("get").expect("exists").died_at_ms;
        let died = died.expect("dead");
        wait_until(Duration::from_secs(1), "the clock to tick", || async move {
            now_ms() > died
        })
        .await;
    }

    let dead = q.dead_letters();
    let mut listed = Vec::new();
    for offset in [0, 2, 4] {
        let page = dead.list(offset, 2).await.expect("list");
        assert_eq!(page.len(), if offset == 4 { 1 } else { 2 });
        listed.extend(page);
    }
    let listed_ids: Vec<&str> = listed.iter().map(|l| l.id.as_str()).collect();
    assert_eq!(listed_ids, ids);
    assert!(listed.windows(2).all(|w| w[0].died_at_ms < w[1].died_at_ms));
    assert!(dead.list(5, 2).await.expect("list").is_empty());
}

#[tokio::test]
async fn requeue_makes_a_dead_letter_ready_with_its_attempts_reset() {
    let (_server, q) = fresh_queue().await;
    // A generated id: requeueing must keep it usable.
    let sent = q
        .send(b"body", &SendOptions::new().max_attempts(2))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    fail_until_dead(&q, &mut consumer, &["one", "two"]).await;

    let dead = q.dead_letters();
    assert!(dead.requeue(&sent.id).await.expect("requeue"));
    assert_eq!(dead.count().await.expect("count"), 0);
    let info = q.get(&sent.id).await.expect("get").expect("exists");
    assert_eq!((info.state, info.attempts), (State::Ready, 0));
    assert_eq!(info.last_error.as_deref(), Some("two"), "last error kept");
    assert!(!dead.requeue(&sent.id).await.expect("requeue"), "not dead");
    assert!(!dead.requeue("nope").await.expect("requeue"));

    // It gets its full number of attempts again.
    fail_until_dead(&q, &mut consumer, &["three", "four"]).await;
    assert!(dead.requeue(&sent.id).await.expect("requeue"));
    assert_eq!(
        q.cancel(&sent.id).await.expect("cancel"),
        CancelOutcome::Cancelled(State::Ready)
    );
    assert!(is_empty(&q).await);
}

#[tokio::test]
async fn a_dead_letter_keeps_its_id_until_purged() {
    let (_server, q) = fresh_queue().await;
    q.send(b"old", &SendOptions::new().id("m").max_attempts(1))
        .await
        .expect("send");
    let mut consumer = q.consumer().await.expect("consumer");
    fail_until_dead(&q, &mut consumer, &["boom"]).await;

    let dup = q
        .send(b"new", &SendOptions::new().id("m"))
        .await
        .expect("send");
    assert!(dup.duplicate);
    assert_eq!(dup.due_ms, None);
    assert_eq!(
        q.cancel("m").await.expect("cancel"),
        CancelOutcome::NotCancelled(State::Dead)
    );
    assert!(matches!(
        q.reschedule("m", Schedule::Now).await,
        Err(Error::WrongState {
            state: State::Dead,
            ..
        })
    ));
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!(
        (info.state, info.payload.as_slice()),
        (State::Dead, &b"old"[..])
    );

    let dead = q.dead_letters();
    assert!(dead.purge("m").await.expect("purge"));
    assert!(!dead.purge("m").await.expect("purge"), "already purged");
    assert!(!dead.purge("nope").await.expect("purge"));
    assert_eq!(q.get("m").await.expect("get"), None);
    assert!(is_empty(&q).await);

    // The id is free again, and nothing of the old message remains.
    let sent = q
        .send(b"new", &SendOptions::new().id("m"))
        .await
        .expect("send");
    assert!(!sent.duplicate);
    let info = q.get("m").await.expect("get").expect("exists");
    assert_eq!((info.attempts, info.last_error), (0, None));
    assert_eq!(info.payload, b"new");
}

#[tokio::test]
async fn requeue_all_and_purge_all_handle_more_than_one_chunk() {
    const N: u64 = MAX_BATCH as u64 + 1;
    let (_server, q) = fresh_queue().await;
    let dead = q.dead_letters();
    assert_eq!(dead.requeue_all().await.expect("requeue all"), 0);
    assert_eq!(dead.purge_all().await.expect("purge all"), 0);

    send_single_attempt(&q, N as usize).await;
    let_all_die(&q, N).await;
    assert_eq!(dead.requeue_all().await.expect("requeue all"), N);
    assert_eq!(counts(&q).await, [0, N, 0, 0]);
    let page = dead.list(0, 1).await.expect("list");
    assert!(page.is_empty());

    let_all_die(&q, N).await;
    assert_eq!(dead.purge_all().await.expect("purge all"), N);
    assert!(is_empty(&q).await);
    assert_eq!(dead.count().await.expect("count"), 0);
}
