//! The worker loop: claim as many messages as there are free handler slots, run each
//! handler in its own task, keep leases alive, and shut down without stranding messages.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch, Semaphore};
use tokio::task::{AbortHandle, JoinSet};

use super::builder::Worker;
use super::catch_unwind::CatchUnwind;
use super::settle::{self, Carrying, Outcome, Running};
use crate::consume::consumer::Consumer;
use crate::queue::Queue;
use crate::queue_set::QueueSet;
use crate::telemetry::spans;
use crate::values::delivery::Delivery;
use crate::values::error::Result;
use crate::values::message::Next;
use crate::values::options::ReceiveOptions;

use super::failure::{report_dead, DeadLetterHook, FailedDelivery, Failure, FailureHook};
use crate::values::message::Amend;

/// Why a worker stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StopReason {
    /// Shutdown was asked for; running handlers finished or were handed back.
    GracefulShutdown {
        /// Messages handed back unfinished because the grace period ran out.
        released: usize,
    },
}

/// How long one receive waits before the loop looks around again.
const RECEIVE_WAIT: Duration = Duration::from_secs(5);

impl<H, Fut, E> Worker<H>
where
    H: Fn(Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
    E: Display + Send + 'static,
{
    /// Runs until `shutdown` completes, then shuts down gracefully.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<StopReason> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let work = self.work(stop_rx);
        tokio::pin!(work);
        tokio::select! {
            result = &mut work => result,
            () = shutdown => {
                stop_tx.send_replace(true);
                work.await
            }
        }
    }

    async fn work(self, mut stop: watch::Receiver<bool>) -> Result<StopReason> {
        let s = &self.settings;
        let mut consumer = reconnecting_consumer(&s.queues, &mut stop).await;
        // Finished handlers' acks ride on the consumer's next claims (ack_carry.rs).
        let carrying = (!s.ack_linger.is_zero()).then(|| Carrying {
            acks: Arc::default(),
            linger: s.ack_linger,
        });
        if let (Some(consumer), Some(carrying)) = (consumer.as_mut(), &carrying) {
            consumer.carry_acks(carrying.acks.clone());
        }
        // Bounds the handlers running at once; a permit travels with each handler task.
        let slots = Arc::new(Semaphore::new(s.concurrency));
        let lanes: Vec<WorkerQueue> = s
            .queues
            .queues()
            .map(|(q, _)| {
                WorkerQueue::start(q, s.lease, s.on_dead_letter.clone(), carrying.clone())
            })
            .collect();
        let mut tasks = JoinSet::new();

        let mut pause = Duration::from_millis(100);
        while let Some(consumer) = consumer.as_mut() {
            // Reap finished handler tasks so the set only holds running ones.
            while tasks.try_join_next().is_some() {}
            let first = tokio::select! {
                biased;
                _ = stop.wait_for(|stopped| *stopped) => break,
                permit = slots.clone().acquire_owned() => permit,
            };
            let Ok(first) = first else { break };
            let mut permits = vec![first];
            while permits.len() < s.batch {
                match slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            let options = ReceiveOptions {
                max: permits.len(),
                lease: s.lease,
                wait: RECEIVE_WAIT,
            };
            let mut stop_wait = stop.clone();
            let stopped = async move {
                let _ = stop_wait.wait_for(|stopped| *stopped).await;
            };
            let received = consumer.receive_from_lanes(&options, stopped).await;
            for dead in consumer.take_dead_lettered() {
                report_dead(s.on_dead_letter.as_ref(), &dead);
            }
            let deliveries = match received {
                Ok(d) => {
                    pause = Duration::from_millis(100);
                    d
                }
                Err(e) => {
                    tracing::warn!(queue = %lanes[0].queue.name(), error = %e, retry_in = ?pause, "receive failed");
                    tokio::select! {
                        _ = tokio::time::sleep(pause) => {}
                        _ = stop.wait_for(|stopped| *stopped) => break,
                    }
                    pause = (pause * 2).min(Duration::from_secs(5));
                    continue;
                }
            };
            let mut deliveries = deliveries.into_iter();
            // Permits first: zip then stops without taking a delivery it has no slot for.
            for (permit, (lane, delivery)) in permits.into_iter().zip(deliveries.by_ref()) {
                let lane = &lanes[lane];
                if lane.running.too_late_to_start(&delivery) {
                    // Its claim reply came too late: it would be cancelled before its first
                    // renewal, and another consumer may hold it soon.
                    tracing::warn!(queue = %delivery.queue, id = %delivery.id, "delivery arrived as its lease was ending; not started, Redis hands it out again");
                    continue;
                }
                let handler = self.handler.clone();
                let (registry, outcomes) = (lane.running.clone(), lane.outcomes.clone());
                let receipt = delivery.without_payload();
                let token = receipt.token;
                lane.running.insert(&receipt);
                let metrics = lane.queue.core().metrics().clone();
                // The sender's timeout for this message, if any, comes first.
                let timeout = delivery.handler_timeout.or(s.handler_timeout);
                let on_failure = s.on_failure.clone();
                // The hook sees the payload; the handler takes the delivery.
                let kept = on_failure.as_ref().map(|_| delivery.clone());
                // The handler runs in a `process` span joined to the message's trace.
                let trace = spans::ProcessTrace::of(&delivery);
                let task = tasks.spawn(trace.run(async move {
                    let _permit = permit;
                    let started = tokio::time::Instant::now();
                    let handled = CatchUnwind::new(handler(delivery));
                    // None: the handler ran out of time (its future is dropped here).
                    let handled = async move {
                        match timeout {
                            Some(t) => tokio::time::timeout(t, handled).await.ok(),
                            None => Some(handled.await),
                        }
                    };
                    let outcome = tokio::select! {
                        result = handled => match result {
                            Some(Ok(Ok(()))) => Outcome::Done,
                            Some(Ok(Err(e))) => failed(e.to_string(), next_after(&e), on_failure, kept),
                            Some(Err(panic)) => failed(panic_text(panic), Next::Backoff, on_failure, kept),
                            None => failed(
                                format!("handler timed out after {:?}", timeout.unwrap_or_default()),
                                Next::Backoff,
                                on_failure,
                                kept,
                            ),
                        },
                        // Logged there; the message is Redis's to hand out again.
                        () = registry.lease_passed(token) => return,
                    };
                    let took = started.elapsed().as_secs_f64();
                    metrics.handler_duration.record(took);
                    // Settle only if nobody else (shutdown, a lost lease) took the delivery.
                    if registry.finish(token) {
                        let _ = outcomes.send((receipt, outcome));
                    }
                }));
                lane.running.set_abort(token, task);
            }
            // A repeated claim (its first reply lost) can return more than the slots it was
            // sent for: hand those back at once rather than at their lease's end.
            for (lane, delivery) in deliveries {
                let queue = lanes[lane].queue.clone();
                tokio::spawn(async move { settle::release(&queue, &[delivery]).await });
            }
        }

        // What the consumer took ahead of its due time was not started: pending again.
        if let Some(consumer) = consumer.as_mut() {
            if let Err(e) = consumer.release_taken_ahead().await {
                tracing::warn!(error = %e, "releasing what was taken ahead failed; it returns after its lease");
            }
        }
        let finished = tokio::time::timeout(s.shutdown_grace, async {
            while tasks.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        let mut released = 0;
        if !finished {
            for lane in &lanes {
                let unfinished = lane.running.abort_all();
                released += settle::release(&lane.queue, &unfinished).await.unwrap_or_else(|e| {
                    tracing::warn!(queue = %lane.queue.name(), error = %e, "handing back unfinished messages failed; they return after their lease");
                    0
                });
            }
            tasks.shutdown().await;
        }
        // Settling what finished is bounded by the lease: after that the messages come back by
        // lease expiry anyway.
        for lane in lanes {
            lane.finish(s.lease).await;
        }
        Ok(StopReason::GracefulShutdown { released })
    }
}

/// What a worker runs for each of its queues: the registry of its running handlers, their
/// heartbeat, and the settler that acks and nacks them in batches.
struct WorkerQueue {
    queue: Queue,
    running: Running,
    /// Handlers report here; one settler acks them in batches (one script call for many).
    outcomes: mpsc::UnboundedSender<(Delivery, Outcome)>,
    settler: tokio::task::JoinHandle<()>,
    _settler_guard: AbortOnDrop,
    _heartbeat: AbortOnDrop,
}

impl WorkerQueue {
    fn start(
        queue: &Queue,
        lease: Duration,
        on_dead_letter: Option<DeadLetterHook>,
        carrying: Option<Carrying>,
    ) -> WorkerQueue {
        let running = Running::new(queue.name().clone(), lease);
        let (outcomes, settle_rx) = mpsc::unbounded_channel();
        let settler = tokio::spawn(settle::settler(
            queue.clone(),
            settle_rx,
            lease,
            on_dead_letter,
            carrying,
        ));
        let _heartbeat = {
            let (queue, running) = (queue.clone(), running.clone());
            AbortOnDrop::spawn(async move {
                let mut tick = tokio::time::interval(lease / 3);
                tick.tick().await;
                loop {
                    tick.tick().await;
                    settle::heartbeat(&queue, &running, lease).await;
                }
            })
        };
        WorkerQueue {
            queue: queue.clone(),
            running,
            outcomes,
            _settler_guard: AbortOnDrop(settler.abort_handle()),
            settler,
            _heartbeat,
        }
    }

    /// Once no handler runs: lets the settler drain what is left, for up to `lease`.
    async fn finish(self, lease: Duration) {
        let WorkerQueue {
            queue,
            outcomes,
            settler,
            _settler_guard,
            ..
        } = self;
        // No new outcomes: the settler drains and stops.
        drop(outcomes);
        if tokio::time::timeout(lease, settler).await.is_err() {
            tracing::warn!(queue = %queue.name(), "settling did not finish; unsettled messages return after their lease");
        }
    }
}

/// Aborts a spawned task when dropped, so nothing a worker spawns outlives it: a `run` future
/// that is dropped (its task aborted) must leave no handler running and no lease extended.
struct AbortOnDrop(AbortHandle);

impl AbortOnDrop {
    fn spawn(task: impl Future<Output = ()> + Send + 'static) -> Self {
        AbortOnDrop(tokio::spawn(task).abort_handle())
    }
}

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A consumer, retrying until Redis answers; `None` if stopped first.
async fn reconnecting_consumer(
    set: &QueueSet,
    stop: &mut watch::Receiver<bool>,
) -> Option<Consumer> {
    let mut pause = Duration::from_millis(100);
    loop {
        match set.consumer().await {
            Ok(c) => return Some(c),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?pause, "cannot connect consumer");
                tokio::select! {
                    _ = tokio::time::sleep(pause) => {}
                    _ = stop.wait_for(|stopped| *stopped) => return None,
                }
                pause = (pause * 2).min(Duration::from_secs(5));
            }
        }
    }
}

/// A failed attempt's outcome, after the failure hook (if any) has had its say.
fn failed(
    error: String,
    next: Next,
    hook: Option<FailureHook>,
    delivery: Option<Delivery>,
) -> Outcome {
    let (Some(hook), Some(delivery)) = (hook, delivery) else {
        return Outcome::Failed(error, next, Amend::default());
    };
    let seen = FailedDelivery {
        delivery: &delivery,
        error: &error,
        next,
    };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(&seen))) {
        Ok(verdict) => Outcome::Failed(error, verdict.next.unwrap_or(next), verdict.amend),
        Err(panic) => {
            tracing::error!(id = %delivery.id, panic = %panic_text(panic), "failure hook panicked; the failure counts as it was");
            Outcome::Failed(error, next, Amend::default())
        }
    }
}

/// What a handler's error asks for: a [`Failure`] says; any other error is retried by the
/// message's backoff.
fn next_after<E: 'static>(error: &E) -> Next {
    let any: &dyn std::any::Any = error;
    match any.downcast_ref::<Failure>().map(Failure::next) {
        // Settled in a batch with others: a delay out of range must not fail theirs.
        Some(Next::After(d)) => Next::After(d.min(crate::values::options::MAX_DELAY)),
        Some(next) => next,
        None => Next::Backoff,
    }
}

fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".to_owned());
    format!("handler panicked: {text}")
}
