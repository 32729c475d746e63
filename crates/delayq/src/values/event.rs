//! What an event is: its kind, what it says of its message, and where a reader stands in a
//! queue's events (an [`EventCursor`]: a position in each partition's stream, which may be
//! part-way through a packed entry), where it starts ([`EventStart`]) and what it keeps
//! ([`EventFilter`]). `events.rs` reads them, `event_entries.rs` takes stream entries apart.

use std::fmt;

use crate::values::error::InvalidInput;

/// A stream entry id: the server's ms, then a sequence within that ms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct StreamId(pub(crate) u64, pub(crate) u64);

impl StreamId {
    pub(crate) fn parse(text: &str) -> Option<StreamId> {
        let (ms, seq) = text.split_once('-')?;
        let canonical =
            |s: &str| !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit());
        if !canonical(ms) || !canonical(seq) {
            return None;
        }
        Some(StreamId(ms.parse().ok()?, seq.parse().ok()?))
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.0, self.1)
    }
}

/// Where a reader is in one partition's stream: after entry `id`, or (`within`) part-way
/// through a packed entry `id`, that many of its events read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Position {
    pub(crate) id: StreamId,
    pub(crate) within: Option<u32>,
}

impl Position {
    /// Where this is in its stream: entry, then events of it read (all of them: `None`).
    fn order_key(&self) -> (StreamId, u32) {
        (self.id, self.within.unwrap_or(u32::MAX))
    }

    /// After entry `id`.
    pub(crate) fn after(id: StreamId) -> Position {
        Position { id, within: None }
    }

    /// The start of a range read from here: the entry itself when part of it is left.
    pub(crate) fn range_start(&self) -> String {
        match self.within {
            Some(_) => self.id.to_string(),
            None => format!("({}", self.id),
        }
    }

    /// Events of entry `id` already read from here: to skip.
    pub(crate) fn skip_in(&self, id: StreamId) -> usize {
        match self.within {
            Some(n) if id == self.id => n as usize,
            _ => 0,
        }
    }

    /// The text form: `<ms>-<seq>`, with `~<n>` part-way through.
    pub(crate) fn parse(text: &str) -> Option<Position> {
        match text.split_once('~') {
            Some((id, n)) => Some(Position {
                id: StreamId::parse(id)?,
                within: Some(n.parse().ok().filter(|n| *n > 0)?),
            }),
            None => Some(Position::after(StreamId::parse(text)?)),
        }
    }
}

impl PartialOrd for Position {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Position {
    /// Further along its stream is greater.
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order_key().cmp(&other.order_key())
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.within {
            Some(n) => write!(f, "{}~{n}", self.id),
            None => write!(f, "{}", self.id),
        }
    }
}

/// What happened to a message.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EventKind {
    /// Sent (a new message, or one that replaced a pending message of its id).
    Sent,
    /// Claimed by a consumer, under a lease ([`Event::attempt`] is this delivery's number).
    Delivered,
    /// Acked: done.
    Acked,
    /// A failed attempt, retried at [`Event::due_ms`].
    Retry,
    /// Handed back unprocessed (a worker that stopped): ready again, the attempt not counted.
    Released,
    /// A dead letter: its last attempt failed, or it failed for good.
    Dead,
    /// Its deadline came before it was delivered: a dead letter, or gone
    /// ([`Event::detail`] `dropped`).
    Expired,
    /// A delivery ended without retry because a newer message took its id (an upsert).
    Superseded,
    /// Cancelled while pending.
    Cancelled,
    /// Moved to a new due time while pending.
    Rescheduled,
    /// A dead letter sent back to pending.
    Requeued,
    /// A dead letter deleted.
    Purged,
    /// A kind this delayq does not know (written by a newer one).
    Other(String),
}

impl EventKind {
    /// Every kind this delayq writes.
    pub const ALL: [EventKind; 12] = [
        EventKind::Sent,
        EventKind::Delivered,
        EventKind::Acked,
        EventKind::Retry,
        EventKind::Released,
        EventKind::Dead,
        EventKind::Expired,
        EventKind::Superseded,
        EventKind::Cancelled,
        EventKind::Rescheduled,
        EventKind::Requeued,
        EventKind::Purged,
    ];

    /// Its name, as the stream, the HTTP API and the CLI spell it.
    pub fn as_str(&self) -> &str {
        match self {
            EventKind::Sent => "sent",
            EventKind::Delivered => "delivered",
            EventKind::Acked => "acked",
            EventKind::Retry => "retry",
            EventKind::Released => "released",
            EventKind::Dead => "dead",
            EventKind::Expired => "expired",
            EventKind::Superseded => "superseded",
            EventKind::Cancelled => "cancelled",
            EventKind::Rescheduled => "rescheduled",
            EventKind::Requeued => "requeued",
            EventKind::Purged => "purged",
            EventKind::Other(name) => name,
        }
    }

    /// The kind named `name`: one of [`ALL`](Self::ALL), or an error naming them.
    pub fn parse(name: &str) -> Result<EventKind, InvalidInput> {
        EventKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = EventKind::ALL.iter().map(EventKind::as_str).collect();
                InvalidInput::Option(format!(
                    "event kind {:?} is none of {}",
                    name.chars().take(100).collect::<String>(),
                    names.join(", ")
                ))
            })
    }

    pub(crate) fn from_stream(name: &str) -> EventKind {
        EventKind::parse(name).unwrap_or_else(|_| EventKind::Other(name.to_owned()))
    }
}

impl Event {
    /// An event of no kind, placed nowhere: what an entry is read into, and what stands for
    /// an entry with nothing to return (read past, not shown).
    pub(crate) fn placeholder() -> Event {
        Event {
            kind: EventKind::Other(String::new()),
            id: String::new(),
            at_ms: 0,
            attempt: None,
            due_ms: None,
            error: None,
            detail: None,
            cursor: EventCursor {
                positions: Vec::new(),
            },
        }
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One change of a message's state.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// The message's id.
    pub id: String,
    /// When, by the Redis server's clock (unix ms).
    pub at_ms: u64,
    /// Of a delivery, its number (1 for the first); of a retry, a death or an expiry, the
    /// attempts made; of a release, the attempts that count.
    pub attempt: Option<u32>,
    /// When the message is due (unix ms): of a send, a retry, a reschedule.
    pub due_ms: Option<u64>,
    /// The error that ended an attempt (its first 200 bytes): of a retry, a death.
    pub error: Option<String>,
    /// What else happened: `replaced` (a send took the place of a pending message of its
    /// id), `superseded` (a send beside a message of its id in flight), `dropped` (an expired
    /// message gone rather than a dead letter).
    pub detail: Option<String>,
    /// Where a reader that has seen this event goes on from.
    pub cursor: EventCursor,
}

/// Where a reader is in a queue's events: one stream id per partition. Its text form
/// ([`Display`](fmt::Display), [`EventCursor::parse`]) is what the HTTP API hands out as
/// each event's id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventCursor {
    pub(crate) positions: Vec<Position>,
}

impl EventCursor {
    /// Reads a cursor from its text form.
    pub fn parse(text: &str) -> Result<EventCursor, InvalidInput> {
        let bad = || {
            InvalidInput::Option(format!(
                "event cursor {:?} is not one delayq gave out",
                text.chars().take(200).collect::<String>()
            ))
        };
        if text.is_empty() || text.len() > 16 * 1024 {
            return Err(bad());
        }
        let positions = text
            .split('.')
            .map(|part| Position::parse(part).ok_or_else(bad))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(EventCursor { positions })
    }

    /// For a cursor that follows another reader's events (a server fanning one reader's
    /// events out to many listeners): `before` and `after` are that reader's cursors just
    /// before and after one of its events. Where the event moved it (its partition), this
    /// cursor moves to `after` if that is further along; true if it moved, that is, if the
    /// event is new to this cursor. Cursors of different partition counts are not
    /// comparable: nothing moves.
    pub fn advance_with(&mut self, before: &EventCursor, after: &EventCursor) -> bool {
        let n = self.positions.len();
        if before.positions.len() != n || after.positions.len() != n {
            return false;
        }
        let mut moved = false;
        for ((mine, was), now) in self
            .positions
            .iter_mut()
            .zip(&before.positions)
            .zip(&after.positions)
        {
            if now != was && *now > *mine {
                *mine = *now;
                moved = true;
            }
        }
        moved
    }

    /// How many partitions it names positions in.
    pub fn partitions(&self) -> usize {
        self.positions.len()
    }
}

impl fmt::Display for EventCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.positions.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Where a reader starts.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EventStart {
    /// At the oldest event kept.
    Oldest,
    /// After the last event so far: only what happens from now on.
    Now,
    /// After the event that a reader saw last ([`Event::cursor`]).
    After(EventCursor),
}

/// Which events a reader returns; by default every one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct EventFilter {
    /// Only events of these kinds (none: every kind).
    pub kinds: Vec<EventKind>,
    /// Only events of the message with this id.
    pub id: Option<String>,
}

impl EventFilter {
    /// Every event.
    pub fn new() -> Self {
        EventFilter::default()
    }

    /// Only events of `kind` (and of other kinds given so).
    pub fn kind(mut self, kind: EventKind) -> Self {
        self.kinds.push(kind);
        self
    }

    /// Only events of message `id`.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Whether `event` passes the filter.
    pub fn matches(&self, event: &Event) -> bool {
        (self.kinds.is_empty() || self.kinds.contains(&event.kind))
            && self.id.as_ref().is_none_or(|id| *id == event.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_read_back_as_written() {
        for text in ["1-0", "1795654349126-3~7"] {
            let p = Position::parse(text).expect("valid");
            assert_eq!(p.to_string(), text);
        }
        for text in ["1-0~0", "1-0~", "1~2", "x-0"] {
            assert!(Position::parse(text).is_none(), "{text:?}");
        }
    }

    #[test]
    fn a_cursor_advances_where_another_is_further_along() {
        let cursor = |text: &str| EventCursor::parse(text).expect("valid");
        let mut mine = cursor("5-0.7-0~2");
        // Another reader's event in partition 1, one this cursor has seen.
        assert!(!mine.advance_with(&cursor("9-0.6-0"), &cursor("9-0.7-0~1")));
        assert_eq!(
            mine.to_string(),
            "5-0.7-0~2",
            "partition 0 did not move with it"
        );
        assert!(!mine.advance_with(&cursor("9-0.7-0~1"), &cursor("9-0.7-0~2")));
        assert!(mine.advance_with(&cursor("9-0.7-0~2"), &cursor("9-0.7-0")));
        assert_eq!(
            mine.to_string(),
            "5-0.7-0",
            "the rest of the packed entry is new"
        );
        assert!(mine.advance_with(&cursor("5-0.7-0"), &cursor("6-1.7-0")));
        assert_eq!(mine.to_string(), "6-1.7-0");
        assert!(
            !mine.advance_with(&cursor("1-0"), &cursor("9-0")),
            "another count"
        );
    }
}
