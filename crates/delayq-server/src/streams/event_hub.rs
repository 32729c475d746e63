//! One reader of a queue's events per server, fanned out to every stream open on that
//! queue, so that what Redis does per event does not grow with the number of listeners:
//! fifty dashboards and SSE clients on one queue cost what one does.
//!
//! A stream first catches up with a reader of its own, from where it starts (`oldest`, a
//! cursor) to the end of what Redis keeps, then follows the hub's batches. It subscribes to
//! the hub before it catches up: whatever the hub read before then was in Redis before the
//! stream's own last read, and whatever it reads after reaches the stream. It tells the
//! events it saw already from new ones by its own cursor
//! ([`EventCursor::advance_with`]). A stream that falls behind the hub's backlog catches up
//! on its own again, from its cursor: it misses nothing.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::{Event, EventCursor, EventFilter, EventStart, Queue};
use tokio::sync::broadcast;

/// Batches a hub holds for streams that have not taken them yet; a stream further behind
/// catches up on its own.
const BACKLOG: usize = 64;

/// Events the hub reads at a time.
const READ: usize = 100;

/// How long a hub with no listener lingers before it stops.
const LINGER: Duration = Duration::from_secs(15);

/// What a hub read in one go: its cursor before the first event, and the events (each with
/// the hub's cursor after it).
pub struct Batch {
    /// The hub's cursor before the first event.
    pub start: EventCursor,
    /// The events, each with the hub's cursor after it.
    pub events: Vec<Event>,
}

/// The hubs of one server, by queue. Cheap to clone: clones share the hubs.
#[derive(Clone, Default)]
pub struct EventHubs(Arc<Mutex<HashMap<String, broadcast::Sender<Arc<Batch>>>>>);

impl EventHubs {
    /// A receiver of `queue`'s events from now on, from its hub (started if none runs; it
    /// stops when `stop` completes, if nothing stopped it before). The hub's reader is open
    /// when this returns.
    pub async fn subscribe(
        &self,
        queue: &Queue,
        stop: impl Future<Output = ()> + Send + 'static,
    ) -> delayq::Result<broadcast::Receiver<Arc<Batch>>> {
        let name = queue.name().to_string();
        if let Some(tx) = self.lock_map().get(&name) {
            return Ok(tx.subscribe());
        }
        let reader = queue.events(EventStart::Now, EventFilter::new()).await?;
        let mut hubs = self.lock_map();
        if let Some(tx) = hubs.get(&name) {
            // Another stream started one meanwhile.
            return Ok(tx.subscribe());
        }
        let (tx, rx) = broadcast::channel(BACKLOG);
        hubs.insert(name.clone(), tx.clone());
        tokio::spawn(self.clone().run(name, reader, tx, stop));
        Ok(rx)
    }

    fn lock_map(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<String, broadcast::Sender<Arc<Batch>>>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A hub: reads the queue's events and hands each batch to every receiver, until none
    /// is left, Redis fails (its streams end, and their clients reconnect) or `stop`
    /// completes (the server stops).
    async fn run(
        self,
        name: String,
        mut reader: delayq::EventReader,
        tx: broadcast::Sender<Arc<Batch>>,
        stop: impl Future<Output = ()>,
    ) {
        tokio::pin!(stop);
        loop {
            let start = reader.cursor();
            let read = tokio::select! {
                read = reader.next(READ, Some(LINGER)) => read,
                () = &mut stop => break,
            };
            match read {
                Ok(events) if events.is_empty() => {}
                Ok(events) => {
                    // No receiver is not an error: the check below ends the hub.
                    let _ = tx.send(Arc::new(Batch { start, events }));
                }
                Err(e) => {
                    tracing::warn!(queue = %name, error = %e, "an event hub stops: Redis did not answer");
                    break;
                }
            }
            let mut hubs = self.lock_map();
            if tx.receiver_count() == 0 {
                hubs.remove(&name);
                return;
            }
        }
        let mut hubs = self.lock_map();
        if hubs.get(&name).is_some_and(|t| t.same_channel(&tx)) {
            hubs.remove(&name);
        }
    }
}

/// The events of `batch` that are new to `cursor` and pass `filter`, each with `cursor` as
/// it is after it; `cursor` moves past every new event, those the filter drops included.
/// `None` when the hub's cursors do not fit this one (the queue's partitions changed).
pub fn new_events(
    batch: &Batch,
    cursor: &mut EventCursor,
    filter: &EventFilter,
) -> Option<Vec<Event>> {
    if batch.start.partitions() != cursor.partitions() {
        return None;
    }
    let mut before = &batch.start;
    let mut out = Vec::new();
    for event in &batch.events {
        if cursor.advance_with(before, &event.cursor) && filter.matches(event) {
            let mut event = event.clone();
            event.cursor = cursor.clone();
            out.push(event);
        }
        before = &event.cursor;
    }
    Some(out)
}
