//! What happens after a handler returns: ack or nack, retried through Redis outages; and the
//! registry of running handlers that heartbeats and shutdown work from.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::task::AbortHandle;
use tokio::time::Instant;

use crate::consumer::Delivery;
use crate::error::{Error, Result};
use crate::queue::{Queue, MAX_BATCH};

/// Handlers currently running, by lease token.
#[derive(Default, Clone)]
pub(crate) struct Running(Arc<Mutex<HashMap<u64, Entry>>>);

struct Entry {
    /// The delivery without its payload: all that ack, nack and extend need.
    delivery: Delivery,
    abort: AbortHandle,
}

impl Running {
    fn lock(&self) -> MutexGuard<'_, HashMap<u64, Entry>> {
        // A poisoned lock only means a panic elsewhere while holding it; the map is still
        // consistent (every operation on it is a single insert, remove or read).
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(crate) fn insert(&self, delivery: &Delivery, abort: AbortHandle) {
        let mut stripped = delivery.clone();
        stripped.payload = Vec::new();
        self.lock().insert(
            delivery.token,
            Entry {
                delivery: stripped,
                abort,
            },
        );
    }

    pub(crate) fn remove(&self, token: u64) {
        self.lock().remove(&token);
    }

    pub(crate) fn deliveries(&self) -> Vec<Delivery> {
        self.lock().values().map(|e| e.delivery.clone()).collect()
    }

    /// Cancels every running handler and returns their deliveries.
    pub(crate) fn abort_all(&self) -> Vec<Delivery> {
        self.lock()
            .drain()
            .map(|(_, e)| {
                e.abort.abort();
                e.delivery
            })
            .collect()
    }
}

/// Extends the leases of all running handlers, in batches.
pub(crate) async fn heartbeat(queue: &Queue, running: &Running, lease: Duration) {
    let mut deliveries = running.deliveries();
    for chunk in deliveries.chunks_mut(MAX_BATCH) {
        match queue.extend_many(chunk, lease).await {
            Ok(results) => {
                for (d, r) in chunk.iter().zip(results) {
                    if r.is_none() {
                        tracing::warn!(queue = %queue.name(), id = %d.id, "lease lost while the handler runs");
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
    Failed(String),
}

/// Acks or nacks, retrying through connection errors for as long as the lease could still
/// be valid; after that the message comes back by lease expiry anyway.
pub(crate) async fn settle(queue: &Queue, delivery: &Delivery, outcome: Outcome, lease: Duration) {
    let give_up = Instant::now() + lease;
    let mut pause = Duration::from_millis(50);
    loop {
        let result = match &outcome {
            Outcome::Done => queue.ack(delivery).await,
            Outcome::Failed(error) => queue.nack(delivery, error, None).await.map(drop),
        };
        match result {
            Ok(()) => return,
            Err(e) if e.is_connection_error() && Instant::now() + pause < give_up => {
                tracing::warn!(queue = %queue.name(), id = %delivery.id, error = %e, "settling failed, retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(1));
            }
            Err(e) => {
                log_unsettled(queue, delivery, &e);
                return;
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
