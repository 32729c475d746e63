//! The worker runtime's leases: heartbeats keep slow handlers exclusive, a handler past its
//! timeout (the worker's, or its message's own) is cancelled and its attempt failed, and a
//! handler whose lease is lost is cancelled and never acked.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::worker::{StopReason, WorkerBuilder};
use delayq::{Backoff, DelayQ, Delivery, Message, SendOptions, State};

use crate::common::*;

use crate::worker_helpers::*;

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

/// Records when a handler future was dropped.
struct DroppedAt(Arc<Mutex<Option<tokio::time::Instant>>>);

impl Drop for DroppedAt {
    fn drop(&mut self) {
        *self.0.lock().expect("dropped-at lock") = Some(tokio::time::Instant::now());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_lease_cannot_be_renewed_is_cancelled_well_before_the_lease_ends() {
    // A process can be slow to act on its own timer (starved of CPU, as by a thousand
    // clients reconnecting at once). Cancelling exactly at the lease's end would leave the
    // handler running while Redis already hands the message to someone else; the runtime
    // keeps a margin of a fifth of the lease.
    let server = RedisServer::start();
    let proxy = redis_fixture::Proxy::start(server.port());
    let dq = DelayQ::connect(&proxy.url()).await.expect("connect");
    let q = queue(&dq, "margin");
    let lease = Duration::from_secs(3);
    let attempts = Attempts::default();
    let started = Arc::new(Mutex::new(None));
    let dropped = Arc::new(Mutex::new(None));
    let worker = WorkerBuilder::new(q.clone())
        .lease(lease)
        .build({
            let (attempts, started, dropped) = (attempts.clone(), started.clone(), dropped.clone());
            move |d: Delivery| {
                let (attempts, started, dropped) =
                    (attempts.clone(), started.clone(), dropped.clone());
                async move {
                    attempts.push(d.attempt);
                    if d.attempt == 1 {
                        *started.lock().expect("started lock") = Some(tokio::time::Instant::now());
                        let _dropped = DroppedAt(dropped);
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
    // From now on no request reaches Redis for 4 s: the heartbeat cannot renew the lease.
    proxy.set_request_delay(Duration::from_secs(4));
    wait_until(
        Duration::from_secs(10),
        "the handler to be cancelled",
        || async { dropped.lock().expect("dropped lock").is_some() },
    )
    .await;
    proxy.set_request_delay(Duration::ZERO);
    let started = started.lock().expect("started lock").expect("started");
    let dropped = dropped.lock().expect("dropped lock").expect("dropped");
    let ran = dropped - started;
    assert!(
        ran <= lease - lease / 10,
        "the handler ran {ran:?} of its {lease:?} lease unrenewed before it was cancelled"
    );
    let direct = DelayQ::connect(&server.url()).await.expect("connect");
    let direct_q = queue(&direct, "margin");
    wait_until(
        Duration::from_secs(20),
        "the message to run again and be acked",
        || async { matches!(direct_q.get(&sent.id).await, Ok(None)) },
    )
    .await;
    assert_eq!(attempts.get(), [1, 2]);
    running.shutdown().await;
}
