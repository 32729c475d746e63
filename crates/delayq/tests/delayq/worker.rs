//! The worker runtime: handler outcomes settle messages, retries follow the backoff, a
//! failure hook can amend or bury, panics are failed attempts, and every death is heard once.
//! Leases and timeouts are in `worker_leases.rs`, stopping and Redis outages in
//! `worker_stop.rs`.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::worker::{FailedDelivery, Failure, StopReason, Verdict, WorkerBuilder};
use delayq::{Backoff, Delivery, Message, SendOptions, State};

use crate::common::*;

#[tokio::test]
async fn handler_ok_acks_the_message() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "acked");
    let mut ids = Vec::new();
    for i in 0..5 {
        let sent = q
            .send(format!("job {i}"), &SendOptions::new())
            .await
            .expect("send");
        ids.push(sent.id);
    }
    let seen = Seen::default();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .build({
            let seen = seen.clone();
            move |d: Delivery| {
                let seen = seen.clone();
                async move {
                    seen.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    wait_until(
        Duration::from_secs(10),
        "every message handled and acked",
        || async { seen.contains_all(&ids) && is_empty(&q).await },
    )
    .await;
    for id in &ids {
        assert!(q.get(id).await.expect("get").is_none(), "{id} is gone");
    }
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
}

#[tokio::test]
async fn handler_error_is_retried_by_backoff_then_dead_lettered() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "failing");
    let backoff = Duration::from_millis(150);
    let options = SendOptions::new()
        .max_attempts(3)
        .backoff(Backoff::fixed(backoff));
    let doomed = q
        .send(b"always fails", &options.clone().id("doomed"))
        .await
        .expect("send");
    let flaky = q
        .send(b"fails once", &options.id("flaky"))
        .await
        .expect("send");

    // Per delivery: (id, attempt, handler start ms, handler end ms), host clock.
    let runs = Arc::new(Mutex::new(Vec::<(String, u32, u64, u64)>::new()));
    let worker = WorkerBuilder::new(q.clone())
        .build({
            let runs = runs.clone();
            move |d: Delivery| {
                let runs = runs.clone();
                async move {
                    let start = now_ms();
                    let fail = d.id == "doomed" || d.attempt == 1;
                    runs.lock()
                        .expect("runs lock")
                        .push((d.id, d.attempt, start, now_ms()));
                    if fail {
                        Err("boom")
                    } else {
                        Ok(())
                    }
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    wait_until(
        Duration::from_secs(10),
        "doomed dead, flaky acked",
        || async {
            let dead = q.get(&doomed.id).await.expect("get").map(|i| i.state) == Some(State::Dead);
            dead && q.get(&flaky.id).await.expect("get").is_none()
        },
    )
    .await;
    running.shutdown().await;

    let info = q.get(&doomed.id).await.expect("get").expect("dead letter");
    assert_eq!(info.attempts, 3);
    assert_eq!(info.last_error.as_deref(), Some("boom"));
    assert_eq!(
        counts(&q).await,
        [0, 0, 0, 1],
        "only the dead letter is left"
    );

    let runs = runs.lock().expect("runs lock").clone();
    for (id, attempts) in [("doomed", 3), ("flaky", 2)] {
        let mine: Vec<_> = runs.iter().filter(|r| r.0 == id).collect();
        let seen: Vec<u32> = mine.iter().map(|r| r.1).collect();
        assert_eq!(seen, (1..=attempts).collect::<Vec<_>>(), "attempts of {id}");
        for pair in mine.windows(2) {
            let (failed_at, retried_at) = (pair[0].3, pair[1].2);
            assert!(
                retried_at >= failed_at + backoff.as_millis() as u64,
                "{id} retried {} ms after failing, before its {backoff:?} backoff",
                retried_at - failed_at
            );
        }
    }
}

#[tokio::test]
async fn a_handler_can_fail_for_good_or_ask_for_a_later_retry() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "outcomes");
    let options = SendOptions::new().max_attempts(5);
    let permanent = q.send(b"malformed", &options).await.expect("send").id;
    let throttled = q.send(b"throttled", &options).await.expect("send").id;
    let worker = WorkerBuilder::new(q.clone())
        .build(|d: Delivery| async move {
            if d.payload == b"malformed" {
                Err(Failure::dead("order id is malformed"))
            } else {
                Err(Failure::retry_after(
                    Duration::from_secs(3600),
                    "upstream said 429",
                ))
            }
        })
        .expect("build worker");
    let before = now_ms();
    let running = spawn_worker(worker);
    wait_until(Duration::from_secs(10), "both settled", || async {
        counts(&q).await == [1, 0, 0, 1]
    })
    .await;
    running.shutdown().await;
    let dead = q.get(&permanent).await.expect("get").expect("kept");
    assert_eq!((dead.state, dead.attempts), (State::Dead, 1));
    assert_eq!(dead.last_error.as_deref(), Some("order id is malformed"));
    let later = q.get(&throttled).await.expect("get").expect("kept");
    assert_eq!((later.state, later.attempts), (State::Delayed, 1));
    assert_eq!(later.last_error.as_deref(), Some("upstream said 429"));
    assert!(
        later.due_ms >= before + 3_600_000 && later.due_ms < now_ms() + 3_600_000,
        "due {} ms from the start",
        later.due_ms - before
    );
}

/// Payloads each handler run saw, in order.
#[derive(Clone, Default)]
struct Payloads(Arc<Mutex<Vec<String>>>);

impl Payloads {
    fn push(&self, p: &[u8]) {
        let text = String::from_utf8_lossy(p).into_owned();
        self.0.lock().expect("payloads lock").push(text);
    }

    fn get(&self) -> Vec<String> {
        self.0.lock().expect("payloads lock").clone()
    }
}

#[tokio::test]
async fn a_failure_hook_can_amend_the_message_or_bury_it() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "hooked");
    let quick = SendOptions::new().backoff(Backoff::fixed(Duration::from_millis(20)));
    // Fails while its payload is "v1"; the hook rewrites it to "v2".
    let rewritten = q
        .send(b"v1", &quick.clone().id("rewritten").max_attempts(5))
        .await
        .expect("send");
    // One attempt allowed, fails twice: the hook grants two more.
    let granted = q
        .send(b"stubborn", &quick.clone().id("granted").max_attempts(1))
        .await
        .expect("send");
    // Five attempts allowed; the hook buries it at the first failure.
    let buried = q
        .send(b"poison", &quick.clone().id("buried").max_attempts(5))
        .await
        .expect("send");
    // The hook panics on it: the failure counts as it was, by the backoff.
    let panicky = q
        .send(b"panicky", &quick.id("panicky").max_attempts(2))
        .await
        .expect("send");
    let seen = Payloads::default();
    let hook_calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(4)
        .on_failure({
            let calls = hook_calls.clone();
            move |f: &FailedDelivery<'_>| {
                calls.fetch_add(1, Ordering::SeqCst);
                match f.delivery.id.as_str() {
                    "rewritten" => Verdict::keep().payload("v2"),
                    "granted" if f.delivery.attempt == 1 => Verdict::keep().extra_attempts(2),
                    "buried" => Verdict::dead(),
                    "panicky" => panic!("hook bug"),
                    _ => Verdict::keep(),
                }
            }
        })
        .build({
            let seen = seen.clone();
            move |d: Delivery| {
                let seen = seen.clone();
                async move {
                    seen.push(&d.payload);
                    let fail = d.payload == b"v1"
                        || d.payload == b"poison"
                        || d.payload == b"panicky"
                        || (d.payload == b"stubborn" && d.attempt <= 2);
                    if fail {
                        Err(format!("attempt {} failed", d.attempt))
                    } else {
                        Ok(())
                    }
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    wait_until(Duration::from_secs(10), "everything settled", || async {
        counts(&q).await == [0, 0, 0, 2]
    })
    .await;
    running.shutdown().await;

    assert_eq!(
        q.get(&rewritten.id).await.expect("get"),
        None,
        "acked as v2"
    );
    assert_eq!(
        q.get(&granted.id).await.expect("get"),
        None,
        "acked at attempt 3"
    );
    let dead = q.get(&buried.id).await.expect("get").expect("dead letter");
    assert_eq!((dead.state, dead.attempts), (State::Dead, 1));
    let dead = q.get(&panicky.id).await.expect("get").expect("dead letter");
    assert_eq!(
        (dead.state, dead.attempts),
        (State::Dead, 2),
        "both failures counted"
    );
    let runs = seen.get();
    let count = |p: &str| runs.iter().filter(|r| r.as_str() == p).count();
    assert_eq!((count("v1"), count("v2")), (1, 1), "{runs:?}");
    assert_eq!(count("stubborn"), 3, "{runs:?}");
    assert_eq!(count("poison"), 1, "{runs:?}");
    // v1, stubborn twice, poison, panicky twice.
    assert_eq!(hook_calls.load(Ordering::SeqCst), 6);
}

#[tokio::test]
async fn handler_panic_is_a_failed_attempt_and_the_worker_carries_on() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "panicky");
    let options = SendOptions::new()
        .max_attempts(2)
        .backoff(Backoff::fixed(Duration::from_millis(50)));
    let bad = q
        .send(b"panic", &options.clone().id("bad"))
        .await
        .expect("send");
    let seen = Seen::default();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(1)
        .build({
            let seen = seen.clone();
            move |d: Delivery| {
                let seen = seen.clone();
                async move {
                    if d.payload == b"panic" {
                        panic!("kaboom");
                    }
                    seen.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    wait_until(
        Duration::from_secs(10),
        "the panicking message dead",
        || async { q.get(&bad.id).await.expect("get").map(|i| i.state) == Some(State::Dead) },
    )
    .await;
    let info = q.get(&bad.id).await.expect("get").expect("dead letter");
    assert_eq!(info.attempts, 2, "each panic counts as an attempt");
    let error = info.last_error.expect("last error kept");
    assert!(error.contains("handler panicked"), "last error: {error}");
    assert!(error.contains("kaboom"), "last error: {error}");

    // The same worker goes on with messages sent after the panics.
    let mut later = Vec::new();
    for i in 0..3 {
        later.push(
            q.send(format!("fine {i}"), &options)
                .await
                .expect("send")
                .id,
        );
    }
    wait_until(Duration::from_secs(10), "later messages acked", || async {
        seen.contains_all(&later) && counts(&q).await == [0, 0, 0, 1]
    })
    .await;
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
}

#[tokio::test]
async fn many_failures_at_once_are_each_retried() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "mass-failure");
    let options = SendOptions::new()
        .max_attempts(3)
        .backoff(Backoff::fixed(Duration::from_millis(100)));
    let batch: Vec<Message> = (0..300)
        .map(|i| Message::new(format!("job {i}"), options.clone()))
        .collect();
    let ids: Vec<String> = q
        .send_batch(&batch)
        .await
        .expect("send batch")
        .into_iter()
        .map(|s| s.id)
        .collect();
    // Every first attempt fails together (a downstream outage); every second one succeeds.
    let succeeded = Seen::default();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(300)
        .batch_size(300)
        .build({
            let succeeded = succeeded.clone();
            move |d: Delivery| {
                let succeeded = succeeded.clone();
                async move {
                    if d.attempt == 1 {
                        return Err("downstream unavailable".to_owned());
                    }
                    succeeded.insert(&d.id);
                    Ok(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    wait_until(
        Duration::from_secs(10),
        "every message retried once and acked",
        || async { succeeded.contains_all(&ids) && is_empty(&q).await },
    )
    .await;
    running.shutdown().await;
    assert!(
        q.get(&ids[0]).await.expect("get").is_none(),
        "acked for good"
    );
}

#[tokio::test]
async fn the_dead_letter_hook_hears_each_death_once_under_two_workers() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "deaths");
    let once = SendOptions::new().max_attempts(1);
    let mut ids = HashSet::new();
    // Half fail in a handler; half are taken by a consumer that walks away, so that their
    // lease expires on the last attempt and a worker's claim buries them.
    for i in 0..40 {
        let payload = if i < 20 { "fail" } else { "abandoned" };
        ids.insert(q.send(payload, &once).await.expect("send").id);
    }
    let mut walker = q.consumer().await.expect("consumer");
    let mut abandoned = 0;
    while abandoned < 20 {
        let got = walker
            .receive(&receiving(40, Duration::from_millis(300), Duration::ZERO))
            .await
            .expect("receive");
        for d in got {
            if d.payload == b"fail" {
                q.release(&[d]).await.expect("release");
            } else {
                abandoned += 1;
            }
        }
    }
    drop(walker);

    let heard = Arc::new(Mutex::new(Vec::<delayq::DeadLettered>::new()));
    let start = |heard: Arc<Mutex<Vec<delayq::DeadLettered>>>| {
        let worker = WorkerBuilder::new(q.clone())
            .concurrency(4)
            .on_dead_letter(move |dead| heard.lock().expect("heard").push(dead.clone()))
            .build(|_d: Delivery| async { Err::<(), _>("no luck") })
            .expect("build worker");
        spawn_worker(worker)
    };
    let (a, b) = (start(heard.clone()), start(heard.clone()));
    wait_until(Duration::from_secs(20), "40 dead letters", || async {
        q.stats().await.expect("stats").dead == 40
    })
    .await;
    // Stopped, the workers report nothing more: the counts below are final.
    a.shutdown().await;
    b.shutdown().await;

    let heard = heard.lock().expect("heard").clone();
    let mut count: std::collections::HashMap<&str, usize> = Default::default();
    for dead in &heard {
        *count.entry(dead.id.as_str()).or_default() += 1;
        assert_eq!(dead.queue.as_str(), "deaths");
    }
    assert_eq!(count.len(), 40, "every death heard: {heard:?}");
    assert!(
        count.values().all(|&n| n == 1),
        "a death heard twice: {heard:?}"
    );
    let reasons: HashSet<&str> = heard.iter().map(|d| d.error.as_str()).collect();
    assert_eq!(reasons, HashSet::from(["no luck", "lease expired"]));
    assert!(ids.iter().all(|id| count.contains_key(id.as_str())));
}
