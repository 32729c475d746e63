//! What happens after a handler returns: acks in batches and nacks, retried through Redis
//! outages; and the registry of running handlers that heartbeats and shutdown work from.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, Notify};
use tokio::task::AbortHandle;
use tokio::time::Instant;

use super::failure::{report_dead, DeadLetterHook};
use crate::consume::ack_carry::{AckCarry, CARRY_MOST};
use crate::queue::Queue;
use crate::values::delivery::Delivery;
use crate::values::error::{Error, Result};
use crate::values::message::{Amend, DeadLettered, NackOutcome, Next};
use crate::values::names::QueueName;
use crate::values::options::MAX_BATCH;

/// Handlers currently running, by lease token. Whoever removes a handler's entry decides its
/// outcome, exactly once: the handler finishing (`finish`: ack or nack), shutdown
/// (`abort_all`: hand back), a lost lease (`heartbeat`, `lease_passed`: leave it to Redis).
#[derive(Clone)]
pub(crate) struct Running {
    queue: QueueName,
    /// How long before a lease's end (as this host measures it) a handler that could not
    /// renew it is cancelled: see [`cancel_margin`].
    margin: Duration,
    entries: Arc<Mutex<HashMap<u64, Entry>>>,
}

/// A handler whose lease was not renewed is cancelled this long before the lease ends, not at
/// its end: a process starved of CPU (a thousand clients reconnecting at once, a noisy
/// neighbour) acts on its timers late, hundreds of milliseconds late in the reconnect-storm
/// chaos scenario, while Redis hands the message to another consumer the moment the lease
/// ends. A fifth of the lease still leaves the heartbeat (every third of it) two tries at
/// renewing before the cancel.
fn cancel_margin(lease: Duration) -> Duration {
    lease / 5
}

struct Entry {
    /// The delivery without its payload (all that extend and release need), with its
    /// lease's end as last renewed.
    delivery: Delivery,
    /// Set right after the handler task is spawned.
    abort: Option<AbortHandle>,
}

impl Running {
    pub(crate) fn new(queue: QueueName, lease: Duration) -> Self {
        Running {
            queue,
            margin: cancel_margin(lease),
            entries: Arc::default(),
        }
    }

    /// True if the delivery's lease is too near its end to start its handler: it would be
    /// cancelled before a heartbeat could renew it.
    pub(crate) fn too_late_to_start(&self, delivery: &Delivery) -> bool {
        delivery.lease_remaining() <= self.margin
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map is still
        // consistent (every operation on it is a single insert, remove or read).
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn insert(&self, receipt: &Delivery) {
        let entry = Entry {
            delivery: receipt.clone(),
            abort: None,
        };
        self.lock().insert(receipt.token, entry);
    }

    /// Records how to cancel the handler, unless it has already finished.
    pub(crate) fn set_abort(&self, token: u64, abort: AbortHandle) {
        if let Some(entry) = self.lock().get_mut(&token) {
            entry.abort = Some(abort);
        }
    }

    /// The handler finished: true if its outcome is still its own to settle.
    pub(crate) fn finish(&self, token: u64) -> bool {
        self.lock().remove(&token).is_some()
    }

    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.lock().values().map(|e| e.delivery.clone()).collect()
    }

    /// Notes a renewed lease.
    fn renewed(&self, renewed: &Delivery) {
        if let Some(entry) = self.lock().get_mut(&renewed.token) {
            entry.delivery.expires = renewed.expires;
            entry.delivery.lease_deadline_ms = renewed.lease_deadline_ms;
        }
    }

    /// Completes once the handler's lease is within the margin of its end without renewal,
    /// having taken its entry (so nothing settles it); never completes while someone else
    /// owns its outcome.
    pub(crate) async fn lease_passed(&self, token: u64) {
        loop {
            let expires = self.lock().get(&token).map(|e| e.delivery.expires);
            let Some(expires) = expires else {
                return std::future::pending().await;
            };
            let cancel_at = expires.checked_sub(self.margin).unwrap_or(expires);
            if Instant::now() >= cancel_at {
                if let Some(entry) = self.lock().remove(&token) {
                    tracing::warn!(queue = %self.queue, id = %entry.delivery.id, "lease lost while the handler ran (not renewed, and about to pass); handler cancelled");
                    return;
                }
                continue;
            }
            tokio::time::sleep_until(cancel_at).await;
        }
    }

    /// Cancels the handler of a delivery whose lease Redis reports lost, if it is still
    /// running; says so only then (a handler that finished meanwhile was settled).
    fn lost(&self, token: u64) {
        let Some(entry) = self.lock().remove(&token) else {
            return;
        };
        if let Some(abort) = entry.abort {
            abort.abort();
        }
        tracing::warn!(queue = %self.queue, id = %entry.delivery.id, "lease lost while the handler ran; handler cancelled");
    }

    /// Cancels every running handler and returns their deliveries.
    pub(crate) fn abort_all(&self) -> Vec<Delivery> {
        self.lock()
            .drain()
            .map(|(_, e)| {
                if let Some(abort) = e.abort {
                    abort.abort();
                }
                e.delivery
            })
            .collect()
    }
}

/// Extends the leases of all running handlers, in batches; cancels those whose lease is lost.
pub(crate) async fn heartbeat(queue: &Queue, running: &Running, lease: Duration) {
    let mut deliveries = running.deliveries();
    for chunk in deliveries.chunks_mut(MAX_BATCH) {
        match queue.extend_many(chunk, lease).await {
            Ok(results) => {
                for (d, r) in chunk.iter().zip(results) {
                    match r {
                        Some(_) => running.renewed(d),
                        None => running.lost(d.token),
                    }
                }
            }
            Err(e) => tracing::warn!(queue = %queue.name(), error = %e, "extending leases failed"),
        }
    }
}

/// How a handler ended.
pub(crate) enum Outcome {
    Done,
    Failed(String, Next, Amend),
}

/// Where a settler leaves acks for the worker's claims to carry (`ack_carry.rs`), and for
/// how long at most.
#[derive(Clone)]
pub(crate) struct Carrying {
    pub(crate) acks: Arc<AckCarry>,
    pub(crate) linger: Duration,
}

/// Settles what handlers report until every sender is gone: all that arrived together in
/// one nack call for the failures, and for the successes one ack call, or, `carrying`, acks
/// left for the worker's next claims to carry, those no claim took acked after the linger.
pub(crate) async fn settler(
    queue: Queue,
    mut outcomes: mpsc::UnboundedReceiver<(Delivery, Outcome)>,
    lease: Duration,
    on_dead_letter: Option<DeadLetterHook>,
    carrying: Option<Carrying>,
) {
    let mut batch = Vec::new();
    let returned = carrying.as_ref().map(|c| c.acks.returns_of(queue.name()));
    loop {
        let flush_at = carrying
            .as_ref()
            .and_then(|c| c.acks.next_flush(queue.name()));
        let received = tokio::select! {
            n = outcomes.recv_many(&mut batch, MAX_BATCH) => n,
            () = sleep_until(flush_at) => {
                flush_carried(&queue, lease, carrying.as_ref(), false).await;
                continue;
            }
            () = notified(returned.as_deref()) => continue,
        };
        if received == 0 {
            break;
        }
        let (mut done, mut failed, mut failures) = (Vec::new(), Vec::new(), Vec::new());
        for (delivery, outcome) in batch.drain(..) {
            match outcome {
                Outcome::Done => done.push(delivery),
                Outcome::Failed(error, next, mut amend) => {
                    // One bad change must not fail the batch it is settled with.
                    if let Err(e) = crate::handles::settle::check_amend(queue.core(), &amend) {
                        tracing::warn!(queue = %queue.name(), id = %delivery.id, error = %e, "failure hook's change ignored");
                        amend = Amend::default();
                    }
                    failed.push(delivery);
                    failures.push((error, next, amend));
                }
            }
        }
        if !failed.is_empty() {
            let fails = &failures;
            let settled = retrying(&queue, lease, &failed, Option::is_some, |q, d| async move {
                crate::handles::settle::fail_many(q.core(), d, fails).await
            })
            .await;
            for ((d, (error, _, _)), outcome) in failed.iter().zip(&failures).zip(settled) {
                if outcome == Some(NackOutcome::Dead) {
                    let dead = DeadLettered {
                        queue: queue.name().clone(),
                        id: d.id.clone(),
                        error: error.clone(),
                    };
                    report_dead(on_dead_letter.as_ref(), &dead);
                }
            }
        }
        if let Some(carrying) = carrying.as_ref() {
            done = carry(&queue, lease, carrying, done).await;
        }
        if !done.is_empty() {
            ack_now(&queue, lease, &done).await;
        }
    }
    // Every handler has reported: what waits for a claim is acked now.
    flush_carried(&queue, lease, carrying.as_ref(), true).await;
}

/// Leaves each delivery's ack for a claim to carry, unless its lease is too near its end;
/// returns those to ack now.
async fn carry(
    queue: &Queue,
    lease: Duration,
    carrying: &Carrying,
    done: Vec<Delivery>,
) -> Vec<Delivery> {
    let Ok(layout) = queue.core().known_layout().await else {
        return done;
    };
    let now = Instant::now();
    let mut now_due = Vec::new();
    for d in done {
        // Well before the lease ends: the settler may have to retry the ack on its own.
        let flush_by = (now + carrying.linger).min(d.expires.checked_sub(lease / 2).unwrap_or(now));
        if flush_by <= now {
            now_due.push(d);
        } else {
            let partition = layout.part(layout.for_seq(d.seq));
            carrying.acks.hold(d, partition, flush_by);
        }
    }
    // More than a claim carries: a busy worker's, acked beside its claims.
    if carrying.acks.waiting(queue.name()) > CARRY_MOST {
        now_due.extend(carrying.acks.take_due(queue.name(), now, true));
    }
    now_due
}

/// Acks what waits in `carrying` that is due by now (`all`: everything), in batches.
async fn flush_carried(queue: &Queue, lease: Duration, carrying: Option<&Carrying>, all: bool) {
    let Some(carrying) = carrying else { return };
    let due = carrying.acks.take_due(queue.name(), Instant::now(), all);
    ack_now(queue, lease, &due).await;
}

async fn ack_now(queue: &Queue, lease: Duration, done: &[Delivery]) {
    for batch in done.chunks(MAX_BATCH) {
        retrying(
            queue,
            lease,
            batch,
            |acked| *acked,
            |q, d| async move { q.ack_many(d).await },
        )
        .await;
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

async fn notified(notify: Option<&Notify>) {
    match notify {
        Some(notify) => notify.notified().await,
        None => std::future::pending().await,
    }
}

/// Runs a settling call, retrying through connection errors and Redis's "not now" replies
/// (`LOADING` after a restart, failover) for as long as the leases could
/// still be valid; after that the messages come back by lease expiry anyway. Returns the
/// call's result per delivery (empty if it never succeeded); `settled` tells a result whose
/// lease was lost.
async fn retrying<'a, T, F, Fut>(
    queue: &'a Queue,
    lease: Duration,
    deliveries: &'a [Delivery],
    settled: impl Fn(&T) -> bool,
    call: F,
) -> Vec<T>
where
    F: Fn(&'a Queue, &'a [Delivery]) -> Fut,
    Fut: Future<Output = Result<Vec<T>>>,
{
    let give_up = Instant::now() + lease;
    let mut pause = Duration::from_millis(50);
    loop {
        match call(queue, deliveries).await {
            Ok(results) => {
                for (d, result) in deliveries.iter().zip(&results) {
                    if !settled(result) {
                        log_unsettled(queue, d, &Error::LeaseLost { id: d.id.clone() });
                    }
                }
                return results;
            }
            Err(e) if e.is_retryable() && Instant::now() + pause < give_up => {
                tracing::warn!(queue = %queue.name(), error = %e, "settling failed, retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                for d in deliveries {
                    log_unsettled(queue, d, &e);
                }
                return Vec::new();
            }
        }
    }
}

fn log_unsettled(queue: &Queue, delivery: &Delivery, e: &Error) {
    tracing::warn!(
        queue = %queue.name(),
        id = %delivery.id,
        error = %e,
        "could not settle delivery; it will be redelivered after its lease"
    );
}

/// Hands deliveries back as ready now, in batches.
pub(crate) async fn release(queue: &Queue, deliveries: &[Delivery]) -> Result<usize> {
    let mut released = 0;
    for chunk in deliveries.chunks(MAX_BATCH) {
        released += queue
            .release(chunk)
            .await?
            .into_iter()
            .filter(|r| *r)
            .count();
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use redis_fixture::RedisServer;

    use super::{carry, Carrying};
    use crate::consume::ack_carry::CARRY_MOST;
    use crate::values::options::ReceiveOptions;
    use crate::{DelayQ, Message, SendOptions};

    #[tokio::test]
    async fn a_few_acks_wait_for_a_claim_and_a_busy_workers_go_at_once() {
        let server = RedisServer::start();
        let dq = DelayQ::connect(&server.url()).await.expect("connect");
        let q = dq.queue("busy").expect("queue");
        let n = CARRY_MOST + 6;
        let batch: Vec<Message> = (0..n)
            .map(|_| Message::new("m", SendOptions::new()))
            .collect();
        q.send_batch(&batch).await.expect("send");
        let options = ReceiveOptions {
            max: n,
            lease: Duration::from_secs(60),
            wait: Duration::ZERO,
        };
        let mut consumer = q.consumer().await.expect("consumer");
        let mut done = consumer.receive(&options).await.expect("receive");
        assert_eq!(done.len(), n);
        let carrying = Carrying {
            acks: Default::default(),
            linger: Duration::from_secs(1),
        };
        let rest = done.split_off(10);
        let lease = Duration::from_secs(60);
        assert!(carry(&q, lease, &carrying, done).await.is_empty());
        assert_eq!(carrying.acks.waiting(q.name()), 10, "left for a claim");
        let now = carry(&q, lease, &carrying, rest).await;
        assert_eq!(now.len(), n, "more than a claim carries: all at once");
        assert_eq!(carrying.acks.waiting(q.name()), 0);
    }
}
