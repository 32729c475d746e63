//! Building a worker: which queue, which handler, and how many at once.

use std::fmt::Display;
use std::future::Future;
use std::time::Duration;

use super::failure::{DeadLetterHook, FailedDelivery, FailureHook, Verdict};
use crate::queue::Queue;
use crate::queue_set::QueueSet;
use crate::values::delivery::Delivery;
use crate::values::error::{InvalidInput, Result};
use crate::values::message::DeadLettered;
use crate::values::options::check_count;

/// Most handlers one worker runs at once.
pub const MAX_CONCURRENCY: usize = 100_000;

/// Settings of a [`Worker`].
#[derive(Clone)]
pub struct WorkerBuilder {
    pub(crate) queues: QueueSet,
    pub(crate) concurrency: usize,
    pub(crate) lease: Duration,
    pub(crate) batch: usize,
    pub(crate) shutdown_grace: Duration,
    pub(crate) handler_timeout: Option<Duration>,
    pub(crate) on_failure: Option<FailureHook>,
    pub(crate) on_dead_letter: Option<DeadLetterHook>,
    pub(crate) ack_linger: Duration,
}

/// Longest [`WorkerBuilder::ack_linger`].
pub const MAX_ACK_LINGER: Duration = Duration::from_secs(1);

impl WorkerBuilder {
    /// A worker for `queue`: 8 handlers at once, 30 s leases, claims of up to 8, 10 s grace,
    /// acks that linger up to 20 ms for a claim to carry them.
    pub fn new(queue: Queue) -> Self {
        Self::serving(QueueSet::single(queue))
    }

    /// A worker for every queue of `set`, one pool of handler slots for all of them: as
    /// slots free up it claims from the set's queues in the set's order (strict or by
    /// weight), waiting on all of them at once when none has anything due. Each delivery
    /// names its queue ([`Delivery::queue`]).
    pub fn serving(set: QueueSet) -> Self {
        WorkerBuilder {
            queues: set,
            concurrency: 8,
            lease: Duration::from_secs(30),
            batch: 8,
            shutdown_grace: Duration::from_secs(10),
            handler_timeout: None,
            on_failure: None,
            on_dead_letter: None,
            ack_linger: Duration::from_millis(20),
        }
    }

    /// Most handlers running at once (1 to [`MAX_CONCURRENCY`](MAX_CONCURRENCY)).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Lease of each message; it is extended while its handler runs. A handler whose lease
    /// could not be renewed (Redis unreachable) is cancelled once a fifth of the lease is
    /// left, a margin for a process slow to act on its timers.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease;
        self
    }

    /// Most messages taken per claim (never more than free handler slots).
    pub fn batch_size(mut self, n: usize) -> Self {
        self.batch = n;
        self
    }

    /// How long shutdown waits for running handlers before handing their messages back.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = grace;
        self
    }

    /// Longest a handler may run (default: no limit). Past it the handler's future is dropped,
    /// which cancels it, and the attempt fails with "handler timed out after ...", retried by
    /// the message's backoff like any failure. Until then its lease is extended as usual, so
    /// the timeout may be longer than the lease. A message sent with its own timeout
    /// ([`SendOptions::handler_timeout`](crate::SendOptions::handler_timeout)) gets that one
    /// instead.
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = Some(timeout);
        self
    }

    /// Calls `hook` on every failed attempt (a handler error, a panic, a timeout) before it
    /// is recorded. Its [`Verdict`] may leave the failure as it is, choose what comes next
    /// (a dead letter now, say), replace the payload for the next attempts, or change the
    /// attempts allowed; all of it is applied in the same script call as the failure, with
    /// the lease checked. A hook that panics changes nothing: the failure counts as it was.
    /// It runs on the handler's task: keep it quick.
    pub fn on_failure<F>(mut self, hook: F) -> Self
    where
        F: Fn(&FailedDelivery<'_>) -> Verdict + Send + Sync + 'static,
    {
        self.on_failure = Some(std::sync::Arc::new(hook));
        self
    }

    /// Calls `hook` once for each message that this worker's script calls make a dead
    /// letter: its handlers' last failures (or failures for good), and expired leases on
    /// their last attempt that its claims reclaim. Each death happens in one script call
    /// and is reported only to the caller of that call, so however many workers run, no
    /// death is reported twice; one caused by some other client (an HTTP consumer's claim)
    /// is reported to that client instead. Meant for alerting: it runs on the worker's
    /// tasks, so keep it quick; a hook that panics is logged and the worker carries on.
    pub fn on_dead_letter<F>(mut self, hook: F) -> Self
    where
        F: Fn(&DeadLettered) + Send + Sync + 'static,
    {
        self.on_dead_letter = Some(std::sync::Arc::new(hook));
        self
    }

    /// How long a finished handler's ack may wait for the worker's next claim on its
    /// partition, which then carries it: one script call acks and claims, so a message
    /// costs Redis two calls instead of three. An ack no claim took by then (or near its
    /// lease's end) is sent on its own; shutdown sends all that wait. Default 20 ms, at most
    /// [`MAX_ACK_LINGER`]; zero acks at once.
    ///
    /// What lingering risks: a process that dies in that time has not acked, so the message
    /// is delivered again after its lease, as if the process had died just before acking.
    pub fn ack_linger(mut self, linger: Duration) -> Self {
        self.ack_linger = linger;
        self
    }

    /// The worker, running `handler` on each delivery.
    pub fn build<H, Fut, E>(self, handler: H) -> Result<Worker<H>>
    where
        H: Fn(Delivery) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<(), E>> + Send + 'static,
        E: Display + Send + 'static,
    {
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(InvalidInput::Option(format!(
                "worker concurrency is 1 to {}, not {}",
                MAX_CONCURRENCY, self.concurrency
            ))
            .into());
        }
        check_count("a worker batch", self.batch)?;
        if self.lease < Duration::from_millis(30) {
            return Err(InvalidInput::Option("worker lease must be at least 30 ms".into()).into());
        }
        crate::values::options::checked_ms(self.lease, "lease")?;
        if self.ack_linger > MAX_ACK_LINGER {
            return Err(InvalidInput::Option(format!(
                "ack linger is at most {MAX_ACK_LINGER:?}, not {:?}",
                self.ack_linger
            ))
            .into());
        }
        if let Some(timeout) = self.handler_timeout {
            crate::values::options::check_handler_timeout(timeout)?;
        }
        Ok(Worker {
            settings: self,
            handler: std::sync::Arc::new(handler),
        })
    }
}

/// A worker, ready to [`run`](Worker::run).
pub struct Worker<H> {
    pub(crate) settings: WorkerBuilder,
    pub(crate) handler: std::sync::Arc<H>,
}
