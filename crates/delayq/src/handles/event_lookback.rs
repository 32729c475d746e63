//! Reading a queue's events backwards, for the person on call: the latest events of a queue,
//! and one message's timeline (its events in the order they happened). Both are bounded
//! reads (`XREVRANGE ... COUNT`), however many events are kept; `events.rs` reads forwards.
//!
//! An event read this way carries a cursor that resumes at or before it: its own partition
//! after it, the others after the millisecond before it (a reader that starts there may see
//! again events of that millisecond, never miss one).

use crate::handles::event_entries::{entries, events_of, Entry};
use crate::handles::queue_core::QueueCore;
use crate::store::keys::Keys;
use crate::store::partitions::join_all;
use crate::values::error::Result;
use crate::values::event::{Event, EventCursor, Position, StreamId};

/// Most entries of its partition a timeline looks through, newest first (an entry holds one
/// event, or the packed events of one call).
pub const TIMELINE_SCAN: usize = 20_000;

/// Entries a backward read asks Redis for at a time.
const CHUNK: usize = 1000;

/// One message's events, oldest first, as far back as a timeline looks.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Timeline {
    /// The events, in the order they happened.
    pub events: Vec<Event>,
    /// True when the read reached the oldest event kept: nothing older is left out.
    pub complete: bool,
}

/// The queue's latest `max` events (1 to 1000), newest first.
pub(crate) async fn latest(core: &QueueCore, max: usize) -> Result<Vec<Event>> {
    crate::values::options::check_count("an event read", max)?;
    let layout = core.known_layout().await?;
    let count = layout.count();
    let reads = layout
        .parts()
        .iter()
        .map(|keys| before(core, keys, None, max));
    let mut all = Vec::new();
    for (k, read) in join_all(reads).await.into_iter().enumerate() {
        for (id, fields) in read? {
            let events = events_of((id, fields));
            let total = events.len();
            for (i, mut event) in events.into_iter().enumerate() {
                event.cursor = cursor_at(count, k, id, i, total);
                all.push(((id, k, i), event));
            }
        }
    }
    all.sort_by(|(a, _), (b, _)| b.cmp(a));
    all.truncate(max);
    Ok(all.into_iter().map(|(_, event)| event).collect())
}

/// The timeline of message `id`: its events among the latest [`TIMELINE_SCAN`] entries of
/// its partition (a message's events are all in the partition it lives in).
pub(crate) async fn timeline(core: &QueueCore, id: &str) -> Result<Timeline> {
    crate::values::names::check_lookup_id(id)?;
    let layout = core.known_layout().await?;
    let k = layout.for_id(id);
    let keys = layout.part(k);
    let mut found = Vec::new();
    let mut scanned = 0;
    let mut last = None;
    let complete = loop {
        let chunk = before(core, keys, last, CHUNK).await?;
        let ended = chunk.len() < CHUNK;
        scanned += chunk.len();
        last = chunk.last().map(|(stream_id, _)| *stream_id);
        for (stream_id, fields) in chunk {
            let events = events_of((stream_id, fields));
            let total = events.len();
            // Newest first, as the entries come: an entry's own events reversed too.
            for (i, mut event) in events.into_iter().enumerate().rev() {
                if event.id == id {
                    event.cursor = cursor_at(layout.count(), k, stream_id, i, total);
                    found.push(event);
                }
            }
        }
        if ended {
            break true;
        }
        if scanned >= TIMELINE_SCAN {
            break false;
        }
    };
    found.reverse();
    Ok(Timeline {
        events: found,
        complete,
    })
}

/// Up to `max` entries of partition `keys`' stream, newest first, before `until` (exclusive)
/// or from the newest.
async fn before(
    core: &QueueCore,
    keys: &Keys,
    until: Option<StreamId>,
    max: usize,
) -> Result<Vec<Entry>> {
    let mut conn = core.connection();
    let top = until.map_or("+".to_owned(), |id| format!("({id}"));
    let reply: redis::Value = redis::cmd("XREVRANGE")
        .arg(keys.events())
        .arg(top)
        .arg("-")
        .arg("COUNT")
        .arg(max)
        .query_async(&mut conn)
        .await?;
    entries(reply)
}

/// A cursor that resumes at or before event `i` (of `total`) of entry `id` of partition `k`
/// (of `count`).
fn cursor_at(count: usize, k: usize, id: StreamId, i: usize, total: usize) -> EventCursor {
    let own = match i + 1 < total {
        true => Position {
            id,
            within: Some((i + 1) as u32),
        },
        false => Position::after(id),
    };
    let before = Position::after(StreamId(id.0.saturating_sub(1), u64::MAX));
    EventCursor {
        positions: (0..count)
            .map(|j| if j == k { own } else { before })
            .collect(),
    }
}
