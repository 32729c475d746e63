//! The worker runtime: handler outcomes settle messages, retries follow the backoff, panics
//! are failed attempts, heartbeats keep slow handlers exclusive, shutdown hands back what it
//! cannot finish, and a Redis restart is ridden out.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::worker::{FailedDelivery, Failure, StopReason, Verdict, WorkerBuilder};
use delayq::{Backoff, DelayQ, Delivery, Message, SendOptions, State};
use tokio::sync::{mpsc, Notify};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::util::SubscriberInitExt;

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

/// Counts the handler futures dropped before they finished.
struct DroppedUnfinished(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for DroppedUnfinished {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_handler_past_its_timeout_is_cancelled_and_the_attempt_failed() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "timeouts");
    let options = SendOptions::new()
        .max_attempts(2)
        .backoff(Backoff::fixed(Duration::from_millis(50)));
    let hung = q
        .send(b"hang", &options.clone().id("hung"))
        .await
        .expect("send");
    let cancelled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Seen::default();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .handler_timeout(Duration::from_millis(200))
        .build({
            let (cancelled, seen) = (cancelled.clone(), seen.clone());
            move |d: Delivery| {
                let (cancelled, seen) = (cancelled.clone(), seen.clone());
                async move {
                    if d.payload == b"hang" {
                        let _guard = DroppedUnfinished(cancelled);
                        std::future::pending::<()>().await;
                    }
                    seen.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    wait_until(Duration::from_secs(10), "the hung message dead", || async {
        q.get(&hung.id).await.expect("get").map(|i| i.state) == Some(State::Dead)
    })
    .await;
    let info = q.get(&hung.id).await.expect("get").expect("dead letter");
    assert_eq!(info.attempts, 2, "each timeout counts as an attempt");
    assert_eq!(
        info.last_error.as_deref(),
        Some("handler timed out after 200ms")
    );
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        2,
        "both runs were dropped"
    );

    // The worker goes on with other messages.
    let fine = q.send(b"fine", &options).await.expect("send").id;
    wait_until(
        Duration::from_secs(10),
        "the next message acked",
        || async { seen.contains_all([&fine]) && counts(&q).await == [0, 0, 0, 1] },
    )
    .await;
    running.shutdown().await;
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
async fn a_handler_within_its_timeout_keeps_its_lease_past_the_lease_length() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "slow-in-time");
    let sent = q.send(b"slow", &SendOptions::new()).await.expect("send");
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let worker = WorkerBuilder::new(q.clone())
        .lease(Duration::from_millis(300))
        .handler_timeout(Duration::from_secs(5))
        .build({
            let runs = runs.clone();
            move |_d: Delivery| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(1000)).await;
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    wait_until(
        Duration::from_secs(10),
        "the slow message acked",
        || async { q.get(&sent.id).await.expect("get").is_none() },
    )
    .await;
    running.shutdown().await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "ran once: its lease was extended"
    );
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
async fn slow_handler_keeps_its_lease_and_is_never_doubled_up() {
    let (server, dq) = setup().await;
    let lease = Duration::from_millis(400);
    let busy = lease * 3;
    // Per delivery: (worker, id, attempt, state seen by the handler when it finishes).
    let runs = Arc::new(Mutex::new(Vec::<(usize, String, u32, Option<State>)>::new()));
    let mut workers = Vec::new();
    for w in 0..2 {
        let own = DelayQ::connect(&server.url()).await.expect("connect");
        let q = queue(&own, "slow");
        let worker = WorkerBuilder::new(q.clone())
            .concurrency(4)
            .lease(lease)
            .build({
                let runs = runs.clone();
                move |d: Delivery| {
                    let (runs, q) = (runs.clone(), q.clone());
                    async move {
                        tokio::time::sleep(busy).await;
                        let state = q.get(&d.id).await.map_err(|e| e.to_string())?;
                        runs.lock().expect("runs lock").push((
                            w,
                            d.id,
                            d.attempt,
                            state.map(|i| i.state),
                        ));
                        Ok::<(), String>(())
                    }
                }
            })
            .expect("build worker");
        workers.push(spawn_worker(worker));
    }
    let q = queue(&dq, "slow");
    let mut ids = HashSet::new();
    for i in 0..3 {
        ids.insert(
            q.send(format!("slow {i}"), &SendOptions::new())
                .await
                .expect("send")
                .id,
        );
    }

    wait_until(Duration::from_secs(15), "slow messages acked", || async {
        is_empty(&q).await
    })
    .await;
    for w in workers {
        assert_eq!(
            w.shutdown().await,
            StopReason::GracefulShutdown { released: 0 }
        );
    }
    let runs = runs.lock().expect("runs lock").clone();
    assert_eq!(runs.len(), ids.len(), "one delivery per message: {runs:?}");
    for (worker, id, attempt, state) in &runs {
        assert!(ids.contains(id), "unknown id {id}");
        assert_eq!(*attempt, 1, "{id} redelivered (worker {worker})");
        assert_eq!(
            *state,
            Some(State::InFlight),
            "{id} still held after {busy:?}"
        );
    }
    let distinct: HashSet<_> = runs.iter().map(|r| &r.1).collect();
    assert_eq!(distinct.len(), ids.len());
}

/// Sets a flag when dropped: tells whether a handler future was cancelled.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn shutdown_acks_finished_handlers_and_releases_unfinished_at_once() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "shutdown");
    let quick = q
        .send(b"quick", &SendOptions::new().id("quick"))
        .await
        .expect("send");
    let stuck = q
        .send(b"stuck", &SendOptions::new().id("stuck"))
        .await
        .expect("send");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let finish_quick = Arc::new(Notify::new());
    let stuck_cancelled = Arc::new(AtomicBool::new(false));
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .lease(Duration::from_secs(60))
        .shutdown_grace(Duration::from_secs(1))
        .build({
            let (finish_quick, stuck_cancelled) = (finish_quick.clone(), stuck_cancelled.clone());
            move |d: Delivery| {
                let started = started_tx.clone();
                let (finish_quick, stuck_cancelled) =
                    (finish_quick.clone(), stuck_cancelled.clone());
                async move {
                    let _ = started.send(d.id.clone());
                    if d.payload == b"quick" {
                        finish_quick.notified().await;
                    } else {
                        let _flag = DropFlag(stuck_cancelled);
                        std::future::pending::<()>().await;
                    }
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let mut running = spawn_worker(worker);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id = tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .expect("both handlers start")
            .expect("handler channel open");
        ids.push(id);
    }
    ids.sort();
    assert_eq!(ids, ["quick", "stuck"]);

    running.stop();
    finish_quick.notify_one();
    assert_eq!(
        running.join().await,
        StopReason::GracefulShutdown { released: 1 }
    );

    assert!(
        q.get(&quick.id).await.expect("get").is_none(),
        "quick acked"
    );
    assert!(
        stuck_cancelled.load(Ordering::SeqCst),
        "stuck handler cancelled"
    );
    let info = q.get(&stuck.id).await.expect("get").expect("stuck kept");
    assert_eq!(
        info.state,
        State::Ready,
        "handed back at once, not after the 60 s lease"
    );
    assert_eq!(info.attempts, 0, "the unfinished attempt is not counted");
    let mut consumer = q.consumer().await.expect("consumer");
    let options = delayq::ReceiveOptions {
        wait: Duration::ZERO,
        ..Default::default()
    };
    let again = consumer.receive(&options).await.expect("receive");
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id.as_str(), again[0].attempt), ("stuck", 1));
    q.ack(&again[0]).await.expect("ack");
    assert!(is_empty(&q).await);
}

/// Log lines written by the subscriber a test installs for itself.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
    }
}

// A current-thread runtime: every task runs on this thread, so the thread-local subscriber
// below sees the worker's logs.
#[tokio::test]
async fn worker_rides_out_a_redis_restart() {
    let logs = Logs::default();
    let _logging = tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .with_ansi(false)
        .with_max_level(LevelFilter::WARN)
        .finish()
        .set_default();
    let (mut server, dq) = setup_with(ServerConfig::appendonly()).await;
    let q = queue(&dq, "outage");
    let (started, done) = (Seen::default(), Seen::default());
    let release_held = Arc::new(Notify::new());
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(4)
        .lease(Duration::from_secs(10))
        .build({
            let (started, done, release_held) =
                (started.clone(), done.clone(), release_held.clone());
            move |d: Delivery| {
                let (started, done, release_held) =
                    (started.clone(), done.clone(), release_held.clone());
                async move {
                    started.insert(&d.id);
                    if d.id == "held" {
                        release_held.notified().await;
                    }
                    done.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    // Explicit ids make a retried send harmless: a repeat is reported as a duplicate.
    let batch = |names: Vec<String>, delay: Duration| -> Vec<Message> {
        names
            .into_iter()
            .map(|id| Message::new(id.clone(), SendOptions::new().id(id).delay(delay)))
            .collect()
    };
    let named = |prefix: &str| (0..5).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    let held = vec!["held".to_owned()];
    let (early, late, after) = (named("early"), named("late"), named("after"));
    q.send_batch(&batch(held.clone(), Duration::ZERO))
        .await
        .expect("send held");
    q.send_batch(&batch(early.clone(), Duration::ZERO))
        .await
        .expect("send early");
    q.send_batch(&batch(late.clone(), Duration::from_millis(500)))
        .await
        .expect("send late");
    wait_until(
        Duration::from_secs(10),
        "early messages handled",
        || async { done.contains_all(&early) && started.contains_all(&held) },
    )
    .await;

    server.kill();
    wait_until(
        Duration::from_secs(10),
        "the worker to log the outage",
        || async { logs.text().contains("WARN") },
    )
    .await;
    server.restart();

    let after_batch = batch(after.clone(), Duration::ZERO);
    wait_until(
        Duration::from_secs(10),
        "a send after the restart",
        || async { q.send_batch(&after_batch).await.is_ok() },
    )
    .await;
    release_held.notify_one();
    let everything: Vec<String> = [held, early, late, after].concat();
    wait_until(
        Duration::from_secs(15),
        "every message handled and acked",
        || async {
            done.contains_all(&everything) && q.stats().await.is_ok_and(|s| is_empty_stats(&s))
        },
    )
    .await;
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
    for id in &everything {
        assert!(q.get(id).await.expect("get").is_none(), "{id} acked");
    }
    println!("worker logs during the outage:\n{}", logs.text());
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

/// Attempts that handlers started, in order, shared with the test.
#[derive(Clone, Default)]
struct Attempts(Arc<Mutex<Vec<u32>>>);

impl Attempts {
    fn push(&self, attempt: u32) {
        self.0.lock().expect("attempts lock").push(attempt);
    }

    fn get(&self) -> Vec<u32> {
        self.0.lock().expect("attempts lock").clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_are_retried_while_redis_loads_its_aof() {
    let mut config = ServerConfig::appendonly();
    // A plain-command AOF loads slowly enough to be caught loading.
    config.extra_args = [
        "--aof-use-rdb-preamble",
        "no",
        "--enable-debug-command",
        "yes",
    ]
    .map(String::from)
    .to_vec();
    let (mut server, dq) = setup_with(config).await;
    server.cli(&["DEBUG", "POPULATE", "1500000", "filler", "16"]);
    server.cli(&["BGREWRITEAOF"]);
    wait_until(Duration::from_secs(60), "the AOF rewrite", || async {
        let info = server.cli(&["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    })
    .await;

    let q = queue(&dq, "loading");
    let attempts = Attempts::default();
    let finish = Arc::new(Notify::new());
    let lease = Duration::from_secs(30);
    let worker = WorkerBuilder::new(q.clone())
        .lease(lease)
        .build({
            let (attempts, finish) = (attempts.clone(), finish.clone());
            move |d: Delivery| {
                let (attempts, finish) = (attempts.clone(), finish.clone());
                async move {
                    attempts.push(d.attempt);
                    finish.notified().await;
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    wait_until(Duration::from_secs(5), "the handler to start", || async {
        !attempts.get().is_empty()
    })
    .await;

    server.restart_loading();
    assert!(
        server.is_loading(),
        "Redis is loading when the handler finishes"
    );
    finish.notify_one();
    let loading = q.stats().await;
    if let Err(e) = &loading {
        assert!(e.is_retryable(), "{e} is worth retrying");
    }
    wait_until(
        Duration::from_secs(20),
        "the ack to land after loading, well within the 30 s lease",
        || async { matches!(q.get(&sent.id).await, Ok(None)) },
    )
    .await;
    assert_eq!(attempts.get(), [1], "handled once");
    running.shutdown().await;
}

#[tokio::test]
async fn a_delivery_whose_lease_passed_before_its_claim_reply_arrived_is_not_handled() {
    let server = RedisServer::start();
    let proxy = redis_fixture::Proxy::start(server.port());
    let dq = DelayQ::connect(&proxy.url()).await.expect("connect");
    let direct = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "late-reply");
    let attempts = Attempts::default();
    let worker = WorkerBuilder::new(q.clone())
        .lease(Duration::from_millis(400))
        .build({
            let attempts = attempts.clone();
            move |d: Delivery| {
                let attempts = attempts.clone();
                async move {
                    attempts.push(d.attempt);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    wait_until(Duration::from_secs(5), "the worker to listen", || async {
        listening(&server, "late-reply") >= 1
    })
    .await;

    // Every reply from Redis now reaches the worker 600 ms late: its claim runs in Redis
    // at once, but the lease has passed by the time the worker hears of it.
    proxy.set_reply_delay(Duration::from_millis(600));
    let direct_q = queue(&direct, "late-reply");
    let sent = direct_q
        .send(b"x", &SendOptions::new())
        .await
        .expect("send");
    wait_until(Duration::from_secs(5), "the claim to run", || async {
        direct_q.get(&sent.id).await.ok().flatten().map(|i| i.state) == Some(State::InFlight)
    })
    .await;
    proxy.set_reply_delay(Duration::ZERO);
    wait_until(
        Duration::from_secs(10),
        "the message to be handled",
        || async { matches!(direct_q.get(&sent.id).await, Ok(None)) },
    )
    .await;
    assert_eq!(
        attempts.get(),
        [2],
        "the first delivery arrived after its lease and was never started"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_lease_is_lost_is_cancelled() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "lost-lease");
    let attempts = Attempts::default();
    let cancelled = Arc::new(AtomicBool::new(false));
    let running_now = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let most_at_once = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .lease(Duration::from_millis(300))
        .build({
            let (attempts, cancelled) = (attempts.clone(), cancelled.clone());
            let (running_now, most_at_once) = (running_now.clone(), most_at_once.clone());
            move |d: Delivery| {
                let (attempts, cancelled) = (attempts.clone(), cancelled.clone());
                let (running_now, most_at_once) = (running_now.clone(), most_at_once.clone());
                async move {
                    attempts.push(d.attempt);
                    let now = running_now.fetch_add(1, Ordering::SeqCst) + 1;
                    most_at_once.fetch_max(now, Ordering::SeqCst);
                    let _running = Decrement(running_now);
                    if d.attempt == 1 {
                        let _flag = DropFlag(cancelled);
                        std::future::pending::<()>().await;
                    }
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    wait_until(Duration::from_secs(5), "the handler to start", || async {
        attempts.get() == [1]
    })
    .await;

    // The lease passes under the handler (a stalled heartbeat, a clock jump in Redis): the
    // message is Redis's to hand out again, and this handler must not go on.
    expire_all_leases(&server, "lost-lease");
    wait_until(
        Duration::from_secs(5),
        "the handler to be cancelled",
        || async { cancelled.load(Ordering::SeqCst) },
    )
    .await;
    wait_until(
        Duration::from_secs(10),
        "the retry to be handled",
        || async { matches!(q.get(&sent.id).await, Ok(None)) },
    )
    .await;
    assert_eq!(attempts.get(), [1, 2]);
    assert_eq!(
        most_at_once.load(Ordering::SeqCst),
        1,
        "never two handlers at once"
    );
    running.shutdown().await;
}

struct Decrement(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Decrement {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lease_lost_is_logged_only_for_handlers_that_really_lost_it() {
    let logs = global_logs();
    let (_server, dq) = setup().await;
    let q = queue(&dq, "honest-log");
    let cancelled = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let n = 3000;
    let worker = WorkerBuilder::new(q.clone())
        // More than one heartbeat batch, so that some handlers finish between batches.
        .concurrency(2500)
        .batch_size(500)
        .lease(Duration::from_millis(600))
        .build({
            let cancelled = cancelled.clone();
            move |d: Delivery| {
                let cancelled = cancelled.clone();
                async move {
                    let guard = CountUnlessDisarmed(cancelled, true);
                    let ms = d.payload.iter().fold(0u64, |a, b| a * 31 + u64::from(*b)) % 1500;
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    guard.disarm();
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let batch: Vec<Message> = (0..n)
        .map(|i| Message::new(format!("m{i}"), SendOptions::new()))
        .collect();
    for chunk in batch.chunks(1000) {
        q.send_batch(chunk).await.expect("send");
    }
    let running = spawn_worker(worker);
    wait_until(Duration::from_secs(60), "every message handled", || async {
        is_empty(&q).await
    })
    .await;
    running.shutdown().await;
    let lost_logs = logs
        .for_queue("honest-log")
        .into_iter()
        .filter(|l| l.contains("lease lost"))
        .count();
    assert_eq!(
        lost_logs,
        cancelled.load(Ordering::SeqCst),
        "a lease-lost warning for each handler cancelled by one, and no other"
    );
}

/// Counts one when dropped armed (the handler was cancelled before it finished).
struct CountUnlessDisarmed(Arc<std::sync::atomic::AtomicUsize>, bool);

impl CountUnlessDisarmed {
    fn disarm(mut self) {
        self.1 = false;
    }
}

impl Drop for CountUnlessDisarmed {
    fn drop(&mut self) {
        if self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_finishing_after_shutdown_took_its_message_is_not_also_acked() {
    let logs = global_logs();
    let (_server, dq) = setup().await;
    let q = queue(&dq, "shutdown-race");
    let started = Arc::new(Notify::new());
    let worker = WorkerBuilder::new(q.clone())
        .shutdown_grace(Duration::from_millis(200))
        .build({
            let started = started.clone();
            move |_d: Delivery| {
                let started = started.clone();
                async move {
                    started.notify_one();
                    // Blocks its thread past the grace period, so the abort that shutdown
                    // sends cannot take effect before the handler has finished.
                    std::thread::sleep(Duration::from_millis(800));
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let running = spawn_worker(worker);
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the handler starts");
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 1 }
    );
    let info = q.get(&sent.id).await.expect("get").expect("handed back");
    assert_eq!((info.state, info.attempts), (State::Ready, 0));
    let unsettled: Vec<String> = logs
        .for_queue("shutdown-race")
        .into_iter()
        .filter(|l| l.contains("could not settle"))
        .collect();
    assert!(
        unsettled.is_empty(),
        "released and then acked as well: {unsettled:?}"
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

#[tokio::test]
async fn a_message_sent_with_its_own_handler_timeout_gets_it_in_place_of_the_workers() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "own-timeouts");
    let retry_fast = SendOptions::new()
        .max_attempts(2)
        .backoff(Backoff::fixed(Duration::from_millis(50)));
    // Shorter than the worker's: cut at 150 ms, at each attempt (kept through the retry).
    let hung = q
        .send(
            b"hang",
            &retry_fast
                .clone()
                .id("hung")
                .handler_timeout(Duration::from_millis(150)),
        )
        .await
        .expect("send");
    // Longer than the worker's: a 500 ms handler finishes.
    let slow = q
        .send(
            b"slow",
            &retry_fast.clone().handler_timeout(Duration::from_secs(5)),
        )
        .await
        .expect("send");
    let seen_timeouts = Arc::new(Mutex::new(Vec::new()));
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .handler_timeout(Duration::from_millis(300))
        .build({
            let seen_timeouts = seen_timeouts.clone();
            move |d: Delivery| {
                seen_timeouts
                    .lock()
                    .expect("timeouts")
                    .push(d.handler_timeout);
                async move {
                    match d.payload.as_slice() {
                        b"hang" => std::future::pending::<()>().await,
                        _ => tokio::time::sleep(Duration::from_millis(500)).await,
                    }
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    wait_until(Duration::from_secs(10), "hung dead, slow acked", || async {
        q.get(&hung.id).await.expect("get").map(|i| i.state) == Some(State::Dead)
            && q.get(&slow.id).await.expect("get").is_none()
    })
    .await;
    running.shutdown().await;
    let info = q.get(&hung.id).await.expect("get").expect("dead letter");
    let errors: Vec<&str> = info.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, ["handler timed out after 150ms"; 2]);
    let mut timeouts = seen_timeouts.lock().expect("timeouts").clone();
    timeouts.sort();
    assert_eq!(
        timeouts,
        [
            Some(Duration::from_millis(150)),
            Some(Duration::from_millis(150)),
            Some(Duration::from_secs(5))
        ]
    );
    let zero = q
        .send(b"x", &SendOptions::new().handler_timeout(Duration::ZERO))
        .await;
    assert!(
        matches!(&zero, Err(e) if e.to_string().contains("handler timeout must be at least 1 ms")),
        "{zero:?}"
    );
}
