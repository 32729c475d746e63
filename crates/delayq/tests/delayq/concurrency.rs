//! Many receivers at once: every message is processed, never by two holders at the same time,
//! a dropped worker's messages come back, and cancel or reschedule racing a claim has exactly
//! one winner.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::worker::{StopReason, WorkerBuilder};
use delayq::{
    Backoff, CancelOutcome, DelayQ, Delivery, Error, Message, Queue, Schedule, SendOptions, State,
    MAX_BATCH,
};
use tokio::sync::mpsc;

use crate::common::*;

/// Handler runs per message id: (start, end, worker).
type Ledger = Arc<Mutex<HashMap<String, Vec<(Instant, Instant, usize)>>>>;

/// Sends `n` ready messages with ids `<prefix>-<i>` in batches; returns the ids in order.
async fn send_ready(q: &Queue, prefix: &str, n: usize) -> Vec<String> {
    let ids: Vec<String> = (0..n).map(|i| format!("{prefix}-{i}")).collect();
    for chunk in ids.chunks(MAX_BATCH) {
        let batch: Vec<Message> = chunk
            .iter()
            .map(|id| Message::new(id.clone(), SendOptions::new().id(id.clone())))
            .collect();
        q.send_batch(&batch).await.expect("send batch");
    }
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_share_ten_thousand_messages_without_overlap() {
    const MESSAGES: usize = 10_000;
    let (server, dq) = setup().await;
    let q = queue(&dq, "bulk");
    let ledger = Ledger::default();
    let mut workers = Vec::new();
    for w in 0..3 {
        let own = DelayQ::connect(&server.url()).await.expect("connect");
        let worker = WorkerBuilder::new(queue(&own, "bulk"))
            .concurrency(8)
            .build({
                let ledger = ledger.clone();
                move |d: Delivery| {
                    let ledger = ledger.clone();
                    async move {
                        let start = Instant::now();
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        let end = Instant::now();
                        ledger
                            .lock()
                            .expect("ledger lock")
                            .entry(d.id)
                            .or_default()
                            .push((start, end, w));
                        Ok::<(), String>(())
                    }
                }
            })
            .expect("build worker");
        workers.push(spawn_worker(worker));
    }

    let started = Instant::now();
    let ids = send_ready(&q, "m", MESSAGES).await;
    wait_until(
        Duration::from_secs(30),
        "all messages processed and acked",
        || async { ledger.lock().expect("ledger lock").len() == MESSAGES && is_empty(&q).await },
    )
    .await;
    println!(
        "{MESSAGES} messages through 3 workers in {:?}",
        started.elapsed()
    );
    for w in workers {
        assert_eq!(
            w.shutdown().await,
            StopReason::GracefulShutdown { released: 0 }
        );
    }

    let ledger = ledger.lock().expect("ledger lock");
    for id in &ids {
        let mut runs = ledger.get(id).cloned().unwrap_or_default();
        assert!(!runs.is_empty(), "{id} never processed");
        runs.sort_by_key(|r| r.0);
        for pair in runs.windows(2) {
            assert!(
                pair[1].0 >= pair[0].1,
                "{id} held by workers {} and {} at once",
                pair[0].2,
                pair[1].2
            );
        }
    }
    let mut per_worker = [0usize; 3];
    ledger.values().flatten().for_each(|r| per_worker[r.2] += 1);
    let repeated = ledger.values().filter(|runs| runs.len() > 1).count();
    println!("handler runs per worker: {per_worker:?}; messages run more than once: {repeated}");
}

#[tokio::test]
async fn dropped_worker_messages_return_after_the_lease() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "dropped");
    let lease = Duration::from_millis(300);
    let options = SendOptions::new().backoff(Backoff::fixed(Duration::from_millis(50)));
    let mut ids = HashSet::new();
    for i in 0..3 {
        ids.insert(q.send(format!("job {i}"), &options).await.expect("send").id);
    }
    let live_handlers = Arc::new(AtomicUsize::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(4)
        .lease(lease)
        .build({
            let live_handlers = live_handlers.clone();
            move |d: Delivery| {
                let (live, started) = (LiveGuard::new(&live_handlers), started_tx.clone());
                async move {
                    let _live = live;
                    let _ = started.send(d);
                    std::future::pending::<()>().await;
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    let mut first = HashMap::new();
    while first.len() < ids.len() {
        let d = tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .expect("every handler starts")
            .expect("handler channel open");
        first.insert(d.id.clone(), d);
    }

    running.abort().await;
    wait_until(
        Duration::from_secs(5),
        "the dropped worker's handlers to stop",
        || async { live_handlers.load(Ordering::SeqCst) == 0 },
    )
    .await;

    let other = DelayQ::connect(&server.url()).await.expect("connect");
    let mut consumer = queue(&other, "dropped").consumer().await.expect("consumer");
    let options = receiving(10, Duration::from_secs(30), Duration::from_secs(5));
    let mut again = Vec::new();
    while again.len() < ids.len() {
        let got = consumer.receive(&options).await.expect("receive");
        assert!(
            !got.is_empty(),
            "messages back within 5 s of their {lease:?} lease"
        );
        let received_at = now_ms();
        again.extend(got.into_iter().map(|d| (d, received_at)));
    }
    for (d, received_at) in &again {
        let before = &first[&d.id];
        assert_eq!(d.attempt, 2, "{} redelivered as the second attempt", d.id);
        assert_eq!(d.payload, before.payload);
        assert!(
            *received_at >= before.lease_deadline_ms,
            "{} came back before its first lease ended",
            d.id
        );
        q.ack(d).await.expect("ack");
    }
    assert!(is_empty(&q).await);
}

/// Counts live handler futures: up on creation, down on drop.
struct LiveGuard(Arc<AtomicUsize>);

impl LiveGuard {
    fn new(count: &Arc<AtomicUsize>) -> Self {
        count.fetch_add(1, Ordering::SeqCst);
        LiveGuard(count.clone())
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Runs `consumers` consumers that receive (up to 2 at a time, waiting up to `wait`) and ack,
/// each until `done(total delivered so far, its last receive was empty)`; returns every
/// delivery with its host receipt time in ms.
async fn consume_until(
    q: &Queue,
    consumers: usize,
    wait: Duration,
    done: impl Fn(usize, bool) -> bool + Send + Clone + 'static,
) -> Vec<(Delivery, u64)> {
    let delivered = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..consumers {
        let mut consumer = q.consumer().await.expect("consumer");
        let (q, delivered, done) = (q.clone(), delivered.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let options = receiving(2, Duration::from_secs(30), wait);
            let mut mine = Vec::new();
            loop {
                let got = consumer.receive(&options).await.expect("receive");
                let received_at = now_ms();
                let total = delivered.fetch_add(got.len(), Ordering::SeqCst) + got.len();
                let empty = got.is_empty();
                for d in got {
                    q.ack(&d).await.expect("ack");
                    mine.push((d, received_at));
                }
                if done(total, empty) {
                    return mine;
                }
            }
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("consumer task"));
    }
    all
}

/// How many times each id was delivered.
fn delivery_counts(deliveries: &[(Delivery, u64)]) -> HashMap<&str, usize> {
    let mut counts = HashMap::new();
    for (d, _) in deliveries {
        *counts.entry(d.id.as_str()).or_default() += 1;
    }
    counts
}

/// Starts `op` on every other id from two tasks on a connection of their own, last id first:
/// consumers claim from the front, so the two sides meet part-way and race there. The tasks
/// return each id with its result.
async fn on_even_ids<T, F, Fut>(
    server: &RedisServer,
    name: &str,
    ids: &[String],
    op: F,
) -> Vec<tokio::task::JoinHandle<Vec<(String, T)>>>
where
    T: Send + 'static,
    F: Fn(Queue, String) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = T> + Send,
{
    let own = DelayQ::connect(&server.url()).await.expect("connect");
    (0..2)
        .map(|part| {
            let (q, op) = (queue(&own, name), op.clone());
            let mine: Vec<String> = ids
                .iter()
                .step_by(2)
                .rev()
                .skip(part)
                .step_by(2)
                .cloned()
                .collect();
            tokio::spawn(async move {
                let mut results = Vec::new();
                for id in mine {
                    let result = op(q.clone(), id.clone()).await;
                    results.push((id, result));
                }
                results
            })
        })
        .collect()
}

async fn join_all<T>(tasks: Vec<tokio::task::JoinHandle<Vec<T>>>) -> Vec<T> {
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await.expect("task"));
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_racing_receive_has_exactly_one_winner() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "cancel-race");
    let ids = send_ready(&q, "c", 400).await;

    let cancelling = on_even_ids(&server, "cancel-race", &ids, |q, id| async move {
        q.cancel(&id).await.expect("cancel")
    })
    .await;
    // A receive that finds nothing ends a consumer: all is then claimed or cancelled.
    let delivered = consume_until(&q, 3, Duration::ZERO, |_, empty| empty).await;
    let outcomes = join_all(cancelling).await;

    let counts = delivery_counts(&delivered);
    let mut cancelled = HashSet::new();
    for (id, outcome) in &outcomes {
        let was_delivered = counts.contains_key(id.as_str());
        match outcome {
            CancelOutcome::Cancelled(State::Ready) => {
                assert!(!was_delivered, "{id} both cancelled and delivered");
                cancelled.insert(id.as_str());
            }
            CancelOutcome::NotCancelled(State::InFlight) | CancelOutcome::NotFound => {
                assert!(was_delivered, "{id} neither cancelled nor delivered");
            }
            other => panic!("cancel of {id}: unexpected {other:?}"),
        }
    }
    for id in &ids {
        let times = counts.get(id.as_str()).copied().unwrap_or(0);
        let expected = usize::from(!cancelled.contains(id.as_str()));
        assert_eq!(times, expected, "{id} delivered {times} times");
    }
    println!(
        "cancel race: {} of {} cancels won",
        cancelled.len(),
        outcomes.len()
    );
    assert!(is_empty(&q).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reschedule_racing_receive_delivers_once_at_the_time_that_won() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "reschedule-race");
    let ids = send_ready(&q, "r", 400).await;
    let mut first_due = HashMap::new();
    for id in &ids {
        let info = q.get(id).await.expect("get").expect("sent");
        first_due.insert(id.clone(), info.due_ms);
    }

    let later = Schedule::After(Duration::from_millis(300));
    let rescheduling = on_even_ids(&server, "reschedule-race", &ids, move |q, id| async move {
        q.reschedule(&id, later).await
    })
    .await;
    let total = ids.len();
    let delivered = consume_until(&q, 3, Duration::from_millis(500), move |n, _| n >= total).await;
    let outcomes = join_all(rescheduling).await;

    let counts = delivery_counts(&delivered);
    for id in &ids {
        assert_eq!(
            counts.get(id.as_str()),
            Some(&1),
            "{id} delivered exactly once"
        );
    }
    let mut due = first_due;
    let mut moved = 0;
    for (id, outcome) in outcomes {
        match outcome {
            Ok(new_due) => {
                due.insert(id, new_due);
                moved += 1;
            }
            Err(
                Error::WrongState {
                    state: State::InFlight,
                    ..
                }
                | Error::NotFound { .. },
            ) => {}
            Err(e) => panic!("reschedule of {id}: unexpected {e}"),
        }
    }
    for (d, received_at) in &delivered {
        assert_eq!(
            d.due_ms, due[&d.id],
            "{} delivered for the due time that won",
            d.id
        );
        assert!(
            *received_at >= d.due_ms,
            "{} delivered before it was due",
            d.id
        );
    }
    println!("reschedule race: {moved} of {} reschedules won", total / 2);
    assert!(is_empty(&q).await);
}
