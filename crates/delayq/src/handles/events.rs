//! A queue's events: one per change of a message's state (sent, delivered, acked, retried,
//! dead, ...), written by the very script that makes the change (`events.lua`) while the
//! queue records them ([`Setting::Events`](crate::Setting::Events)), and read here.
//!
//! Each partition keeps its events in a capped Redis Stream, so a reader names where it is
//! with one stream id per partition: an [`EventCursor`]. A reader starts at the oldest event
//! kept, at now, or at a cursor it saved, and never misses an event still kept, across its
//! own restarts or the server's: the events are in Redis, not in the reader. It waits for new
//! events without polling, on the shard channel their scripts publish to (`wakeup.rs`).
//! Events of one partition come in the order they happened; those of several are merged by
//! the Redis server's time of each. A reader reads only the partitions that may have more
//! for it: those whose channel woke it, and those whose last read it did not finish; a
//! partition it read to its end costs nothing until its channel wakes the reader again.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::handles::event_entries::{entries, events_of, Entry};
use crate::handles::queue_core::QueueCore;
use crate::store::keys::Keys;
use crate::store::partitions::{join_all, Layout};
use crate::store::wakeup::Subscription;
use crate::values::error::{InvalidInput, Result};
use crate::values::event::{Event, EventCursor, EventFilter, EventStart, Position};

/// Most events one [`EventReader::next`] returns.
pub const MAX_EVENTS_READ: usize = 1000;

/// Most stream entries one read of a partition asks for: a packed entry holds the events of
/// a whole call (up to a batch's), so fewer entries than events are enough, and the reply
/// stays bounded.
const READ_ENTRIES: usize = 100;

/// Reads a queue's events from a start, in order, waiting for new ones without polling.
/// Made by [`Queue::events`](crate::Queue::events).
pub struct EventReader {
    core: Arc<QueueCore>,
    layout: Arc<Layout>,
    filter: EventFilter,
    positions: Vec<Position>,
    /// Per partition, its channel's subscription (made on first wait, and again after it
    /// was lost) and the wake-ups heard before the last read.
    lanes: Vec<PartitionWatch>,
    /// Most events one [`next`](Self::next) looks at (the filter's drops included) before
    /// it returns, with or without any; `None`: no limit.
    scan_limit: Option<usize>,
}

struct PartitionWatch {
    subscription: Option<Arc<Subscription>>,
    seen: u64,
    /// It may hold events after the reader's position: not read to its end since it was
    /// last woken (or since the reader opened).
    unread: bool,
}

impl Default for PartitionWatch {
    fn default() -> Self {
        PartitionWatch {
            subscription: None,
            seen: 0,
            unread: true,
        }
    }
}

impl EventReader {
    pub(crate) async fn open(
        core: Arc<QueueCore>,
        start: EventStart,
        filter: EventFilter,
    ) -> Result<EventReader> {
        let layout = core.known_layout().await?;
        let count = layout.count();
        let mut reader = EventReader {
            core,
            layout,
            filter,
            positions: vec![Position::default(); count],
            lanes: (0..count).map(|_| PartitionWatch::default()).collect(),
            scan_limit: None,
        };
        match start {
            EventStart::Oldest => {}
            EventStart::After(cursor) => {
                if cursor.positions.len() != count {
                    return Err(InvalidInput::Option(format!(
                        "an event cursor of {} positions, and the queue has {count} partitions",
                        cursor.positions.len()
                    ))
                    .into());
                }
                reader.positions = cursor.positions;
            }
            EventStart::Now => {
                // Subscribed first: an event added after the last one read below is heard.
                reader.subscribe_all().await?;
                let lasts = reader.layout.parts().iter().map(|keys| {
                    let core = &reader.core;
                    async move { last_id(core, keys).await }
                });
                for (k, last) in join_all(lasts).await.into_iter().enumerate() {
                    reader.positions[k] = last?;
                }
            }
        }
        Ok(reader)
    }

    /// Bounds what one [`next`](Self::next) looks at: after `events` events (those its
    /// filter drops included) it returns what it found, perhaps nothing, and its
    /// [`cursor`](Self::cursor) is past them all. A filter that matches little then cannot
    /// make one call read a whole retained stream.
    pub fn with_scan_limit(mut self, events: usize) -> Self {
        self.scan_limit = Some(events.max(1));
        self
    }

    /// True when its last read reached the end of every partition: nothing was kept after
    /// its cursor then.
    pub fn caught_up(&self) -> bool {
        self.lanes.iter().all(|l| !l.unread)
    }

    /// Where the reader is: a reader opened [`After`](EventStart::After) it reads nothing
    /// this one has read.
    pub fn cursor(&self) -> EventCursor {
        EventCursor {
            positions: self.positions.clone(),
        }
    }

    /// The next events that match the reader's filter, oldest first, up to `max` (1 to
    /// [`MAX_EVENTS_READ`]). When there are none yet it waits for one, for up to `wait`
    /// (`None`: until one comes), and returns none if none came.
    pub async fn next(&mut self, max: usize, wait: Option<Duration>) -> Result<Vec<Event>> {
        crate::values::options::check_count("an event read", max)?;
        let max = max.min(MAX_EVENTS_READ);
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let mut looked_at = 0;
        loop {
            for lane in &mut self.lanes {
                if let Some(s) = &lane.subscription {
                    let generation = s.generation();
                    lane.unread |= generation != lane.seen;
                    lane.seen = generation;
                }
            }
            // Within the scan limit, a read looks at no more than is left of it.
            let room = self
                .scan_limit
                .map_or(max, |limit| max.min(limit.saturating_sub(looked_at)).max(1));
            let (events, looked) = self.read(room).await?;
            if !events.is_empty() {
                return Ok(events);
            }
            looked_at += looked;
            if deadline.is_some_and(|d| tokio::time::Instant::now() >= d)
                || self.scan_limit.is_some_and(|limit| looked_at >= limit)
            {
                return Ok(events);
            }
            if looked > 0 {
                // All the filter dropped: there may be more behind them.
                continue;
            }
            if self.subscribe_all().await? {
                // Newly subscribed: what was added before it was not heard, so read again.
                continue;
            }
            let mut woken = Vec::with_capacity(self.lanes.len());
            for lane in &self.lanes {
                if let Some(s) = lane.subscription.clone() {
                    let seen = lane.seen;
                    woken.push(Box::pin(async move { s.woken_since(seen).await }));
                }
            }
            let any_woken = std::future::poll_fn(|cx| {
                for w in &mut woken {
                    if w.as_mut().poll(cx).is_ready() {
                        return std::task::Poll::Ready(());
                    }
                }
                std::task::Poll::Pending
            });
            match deadline {
                Some(d) => {
                    if tokio::time::timeout_at(d, any_woken).await.is_err() {
                        return Ok(Vec::new());
                    }
                }
                None => any_woken.await,
            }
        }
    }

    /// Subscribes each partition's channel that has no live subscription; true if any was
    /// made (its wake-ups count from now).
    async fn subscribe_all(&mut self) -> Result<bool> {
        let mut made = false;
        for (lane, keys) in self.lanes.iter_mut().zip(self.layout.parts()) {
            if lane.subscription.as_ref().is_none_or(|s| s.is_lost()) {
                let s = self.core.subscription_to(&keys.events()).await?;
                lane.seen = s.generation();
                lane.subscription = Some(s);
                // What came before the subscription was not heard.
                lane.unread = true;
                made = true;
            }
        }
        Ok(made)
    }

    /// Reads what follows the reader's positions in the partitions that may have more, up
    /// to `max` events, merged in time order, and moves past them (past those the filter
    /// drops, too); and how many it moved past (0: it did not move).
    async fn read(&mut self, max: usize) -> Result<(Vec<Event>, usize)> {
        let unread: Vec<usize> = (0..self.lanes.len())
            .filter(|k| self.lanes[*k].unread)
            .collect();
        let parts = self.layout.parts();
        let reads = unread
            .iter()
            .map(|&k| read_after(&self.core, &parts[k], &self.positions[k], max));
        // Per event: its entry's id, its partition, its place in its entry and the entry's
        // event count; each partition's at most `max` (no more can be returned).
        let mut events = Vec::new();
        for (&k, read) in unread.iter().zip(join_all(reads).await) {
            let read = read?;
            // A read of fewer entries than it asked for reached the end, unless some of
            // them are not returned below.
            self.lanes[k].unread = read.len() >= max.min(READ_ENTRIES);
            let mut taken = 0;
            for (id, fields) in read {
                let skip = self.positions[k].skip_in(id);
                let all = events_of((id, fields));
                let total = all.len();
                if skip >= total {
                    // Nothing (left) to return of it: the reader moves past it all the same.
                    events.push((id, k, total, total, Event::placeholder()));
                }
                for (i, event) in all.into_iter().enumerate().skip(skip) {
                    if taken < max {
                        events.push((id, k, i, total, event));
                        taken += 1;
                    } else {
                        self.lanes[k].unread = true;
                    }
                }
            }
        }
        // Each partition's events are in order already; a stable sort by time keeps that.
        events.sort_by_key(|(id, k, i, _, _)| (*id, *k, *i));
        for (_, k, _, _, _) in events.iter().skip(max) {
            self.lanes[*k].unread = true;
        }
        events.truncate(max);
        let moved = events.len();
        let mut out = Vec::new();
        for (id, k, i, total, mut event) in events {
            self.positions[k] = match i + 1 < total {
                true => Position {
                    id,
                    within: Some((i + 1) as u32),
                },
                false => Position::after(id),
            };
            if i < total && self.filter.matches(&event) {
                event.cursor = self.cursor();
                out.push(event);
            }
        }
        Ok((out, moved))
    }
}

/// The id of the last entry of partition `keys`' stream, or 0-0 for none.
async fn last_id(core: &QueueCore, keys: &Keys) -> Result<Position> {
    let mut conn = core.connection();
    let reply: Value = redis::cmd("XREVRANGE")
        .arg(keys.events())
        .arg("+")
        .arg("-")
        .arg("COUNT")
        .arg(1)
        .query_async(&mut conn)
        .await?;
    Ok(entries(reply)?
        .into_iter()
        .next()
        .map_or(Position::default(), |(id, _)| Position::after(id)))
}

/// Up to `max` entries of partition `keys`' stream after `after`.
async fn read_after(
    core: &QueueCore,
    keys: &Keys,
    from: &Position,
    max: usize,
) -> Result<Vec<Entry>> {
    let mut conn = core.connection();
    let reply: Value = redis::cmd("XRANGE")
        .arg(keys.events())
        .arg(from.range_start())
        .arg("+")
        .arg("COUNT")
        .arg(max.min(READ_ENTRIES))
        .query_async(&mut conn)
        .await?;
    entries(reply)
}
