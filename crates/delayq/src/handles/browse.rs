//! Paging through the messages of one state in bounded steps: lists of delayed, ready,
//! in-flight and dead messages, and a search of their payloads, for the dashboard and the
//! HTTP API.
//!
//! Each step is one read-only script call per partition (`browse.lua`) that looks at no more
//! than a given number of messages, however many there are, and returns no more than
//! [`BROWSE_PAYLOAD_BYTES`] of each payload (a preview's worth; `get` gives a whole one), so
//! a page of big payloads costs a bounded reply. Where a step stopped is a
//! [`Cursor`]: delayed and ready messages resume after the sort key of the last one seen, and
//! dead letters after the death time and id of the last one seen, so messages that leave
//! meanwhile shift nothing; in-flight messages resume at an offset (their set is small).

use std::fmt;

use crate::handles::by_id::read_message;
use crate::handles::queue_core::{invocation, QueueCore};
use crate::handles::sealed;
use crate::store::partitions::join_all;
use crate::store::scripts::SCRIPTS;
use crate::values::error::{InvalidInput, Result};
use crate::values::message::MessageInfo;
use crate::values::options::check_count;
use crate::values::reply::Reply;
use crate::values::state::State;

/// Most bytes of each payload that a list or search step returns
/// ([`MessageInfo::payload`]; [`MessageInfo::payload_len`] is the whole length).
pub const BROWSE_PAYLOAD_BYTES: usize = 1024;

/// Where a list or a search goes on from: one position per partition. Its text form
/// ([`Display`](fmt::Display), [`Cursor::parse`]) is what the HTTP API hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    positions: Vec<Position>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Position {
    /// Not started.
    Start,
    /// After the message with this sort key (delayed, ready).
    After([u8; 13]),
    /// Skipping this many (in flight; dead, from a cursor of an older delayq).
    Skip(u64),
    /// After the dead letter that died at this time (ms) with this id.
    AfterDeath(u64, String),
    /// Nothing more.
    End,
}

impl Cursor {
    /// Reads a cursor from its text form.
    pub fn parse(text: &str) -> Result<Cursor, InvalidInput> {
        let bad = || {
            InvalidInput::Option(format!(
                "cursor {:?} is not one delayq gave out",
                text.chars().take(200).collect::<String>()
            ))
        };
        if text.is_empty() || text.len() > 64 * 1024 {
            return Err(bad());
        }
        let positions = text
            .split('.')
            .map(|part| match part {
                "s" => Ok(Position::Start),
                "e" => Ok(Position::End),
                _ if part.starts_with('d') => {
                    let (ms, id) = part[1..].split_once('-').ok_or_else(bad)?;
                    let id = unhex(id).ok_or_else(bad)?;
                    Ok(Position::AfterDeath(ms.parse().map_err(|_| bad())?, id))
                }
                _ if part.len() == 26 => {
                    let mut key = [0u8; 13];
                    for (i, byte) in key.iter_mut().enumerate() {
                        *byte = u8::from_str_radix(part.get(2 * i..2 * i + 2).ok_or_else(bad)?, 16)
                            .map_err(|_| bad())?;
                    }
                    Ok(Position::After(key))
                }
                _ => part.parse().map(Position::Skip).map_err(|_| bad()),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Cursor { positions })
    }

    fn position(&self, k: usize) -> &Position {
        self.positions.get(k).unwrap_or(&Position::Start)
    }
}

impl fmt::Display for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.positions.iter().enumerate() {
            if i > 0 {
                f.write_str(".")?;
            }
            match p {
                Position::Start => f.write_str("s")?,
                Position::End => f.write_str("e")?,
                Position::Skip(n) => write!(f, "{n}")?,
                // The id in hex: ids may hold the '.' that separates positions.
                Position::AfterDeath(ms, id) => {
                    write!(f, "d{ms}-")?;
                    for b in id.as_bytes() {
                        write!(f, "{b:02x}")?;
                    }
                }
                Position::After(key) => {
                    for b in key {
                        write!(f, "{b:02x}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// The text of lowercase or uppercase hex `text`, if it is hex of UTF-8.
fn unhex(text: &str) -> Option<String> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    let bytes = (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

/// One step of a list or a search.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Page {
    /// The messages, in the state's order (for a search: those that matched).
    pub messages: Vec<MessageInfo>,
    /// How many messages the step looked at.
    pub scanned: u64,
    /// Where the next step starts, or `None` when this one reached the end.
    pub next: Option<Cursor>,
}

/// What one partition's step gave.
struct Step {
    found: Vec<(Order, MessageInfo)>,
    scanned: u64,
    next: Position,
}

/// A message's place in its state's order, comparable across partitions.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Order {
    Key([u8; 13]),
    Score(u64, String),
}

/// [`Queue::list`](crate::Queue::list): merges the partitions' pages.
pub(crate) async fn list(
    core: &QueueCore,
    state: State,
    after: Option<&Cursor>,
    limit: usize,
) -> Result<Page> {
    check_count("a page", limit)?;
    let steps = browse(core, state, after, limit, b"").await?;
    // Merge the partitions' pages, take the first `limit`, and move each partition on by
    // what was taken from it.
    let mut all: Vec<(Order, usize, MessageInfo)> = Vec::new();
    // Per partition: how many it found, and where it goes on if all of them are taken.
    let mut ends = Vec::with_capacity(steps.len());
    for (part, step) in steps.into_iter().enumerate() {
        ends.push((step.found.len(), step.next));
        all.extend(step.found.into_iter().map(|(o, m)| (o, part, m)));
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all.truncate(limit);
    let mut positions = Vec::with_capacity(ends.len());
    for (part, (found, next)) in ends.into_iter().enumerate() {
        let taken: Vec<&Order> = all
            .iter()
            .filter(|(_, p, _)| *p == part)
            .map(|(o, _, _)| o)
            .collect();
        let old = after.map_or(Position::Start, |c| c.position(part).clone());
        let position = if taken.len() == found {
            next
        } else {
            match (taken.last(), old) {
                (None, old) => old,
                (Some(Order::Key(key)), _) => Position::After(*key),
                (Some(Order::Score(ms, id)), _) if state == State::Dead => {
                    Position::AfterDeath(*ms, id.clone())
                }
                (Some(Order::Score(..)), Position::Skip(n)) => {
                    Position::Skip(n + taken.len() as u64)
                }
                (Some(Order::Score(..)), _) => Position::Skip(taken.len() as u64),
            }
        };
        positions.push(position);
    }
    let scanned = all.len() as u64;
    Ok(page(
        all.into_iter().map(|(_, _, m)| m).collect(),
        scanned,
        positions,
    ))
}

/// [`Queue::search`](crate::Queue::search).
pub(crate) async fn search(
    core: &QueueCore,
    state: State,
    needle: &[u8],
    after: Option<&Cursor>,
    budget: usize,
) -> Result<Page> {
    check_count("a search step", budget)?;
    if needle.is_empty() {
        return Err(InvalidInput::Option("a search needs something to look for".into()).into());
    }
    let steps = browse(core, state, after, budget, needle).await?;
    let scanned = steps.iter().map(|s| s.scanned).sum();
    let mut found: Vec<(Order, MessageInfo)> = Vec::new();
    let mut positions = Vec::with_capacity(steps.len());
    for step in steps {
        found.extend(step.found);
        positions.push(step.next);
    }
    found.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(page(
        found.into_iter().map(|(_, m)| m).collect(),
        scanned,
        positions,
    ))
}

/// One `browse.lua` step on every partition not yet at its end.
async fn browse(
    core: &QueueCore,
    state: State,
    after: Option<&Cursor>,
    limit: usize,
    needle: &[u8],
) -> Result<Vec<Step>> {
    let layout = core.known_layout().await?;
    let k = layout.count();
    if let Some(c) = after {
        if c.positions.len() != k {
            return Err(InvalidInput::Option(format!(
                "cursor has {} positions for a queue of {k} partitions",
                c.positions.len()
            ))
            .into());
        }
    }
    let pending = matches!(state, State::Delayed | State::Ready);
    let steps = layout.parts().iter().enumerate().map(|(part, keys)| {
        let position = after.map_or(&Position::Start, |c| c.position(part)).clone();
        async move {
            let from: Vec<u8> = match (&position, pending) {
                (Position::End, _) => {
                    return Ok(Step {
                        found: Vec::new(),
                        scanned: 0,
                        next: Position::End,
                    })
                }
                (Position::Start, _) => Vec::new(),
                (Position::After(key), true) => key.to_vec(),
                (Position::Skip(n), false) => n.to_string().into_bytes(),
                (Position::AfterDeath(ms, id), false) if state == State::Dead => {
                    format!("{ms}:{id}").into_bytes()
                }
                _ => {
                    return Err(InvalidInput::Option(format!(
                        "cursor is not one of a list of {} messages",
                        state.as_str()
                    ))
                    .into())
                }
            };
            let mut inv = invocation(keys, &SCRIPTS.browse);
            inv.arg(state.as_str())
                .arg(from)
                .arg(limit)
                .arg(needle)
                .arg(BROWSE_PAYLOAD_BYTES);
            let reply = Reply::new(core.invoke(&inv).await?)?;
            read_step(reply, state)
        }
    });
    join_all(steps).await.into_iter().collect()
}

fn page(messages: Vec<MessageInfo>, scanned: u64, positions: Vec<Position>) -> Page {
    let done = positions.iter().all(|p| *p == Position::End);
    Page {
        messages,
        scanned,
        next: (!done).then_some(Cursor { positions }),
    }
}

fn read_step(mut r: Reply, state: State) -> Result<Step> {
    let scanned = r.uint()?;
    let next = match r.opt_bytes()? {
        None => Position::End,
        Some(b) if b.len() == 13 => {
            let mut key = [0u8; 13];
            key.copy_from_slice(&b);
            Position::After(key)
        }
        Some(b) => {
            let bad = || crate::values::error::Error::Protocol("browse: bad next position".into());
            let text = std::str::from_utf8(&b).map_err(|_| bad())?;
            match text.split_once(':') {
                Some((ms, id)) => {
                    Position::AfterDeath(ms.parse().map_err(|_| bad())?, id.to_owned())
                }
                None => Position::Skip(text.parse().map_err(|_| bad())?),
            }
        }
    };
    let mut found = Vec::new();
    while r.remaining() > 0 {
        let id = r.string()?;
        let mut info = if state == State::Completed {
            crate::handles::by_id::read_final(id, &r.bytes()?)?
        } else {
            read_message(&mut r, id, state)?
        };
        let key = r.bytes()?;
        info.payload_len = r.uint()? as usize;
        if r.uint()? == 1 {
            info.sealed = Some(sealed::listed(&std::mem::take(&mut info.payload)));
        }
        let order = match (<[u8; 13]>::try_from(key.as_slice()), &info.completion) {
            (Ok(k), _) => Order::Key(k),
            // The latest ended first.
            (Err(_), Some(done)) => Order::Score(u64::MAX - done.finished_at_ms, info.id.clone()),
            (Err(_), None) => {
                let score = info.lease_deadline_ms.or(info.died_at_ms).unwrap_or(0);
                Order::Score(score, info.id.clone())
            }
        };
        found.push((order, info));
    }
    Ok(Step {
        found,
        scanned,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_after_a_dead_letter_reads_back_as_written() {
        let cursor = Cursor {
            positions: vec![
                Position::AfterDeath(1_795_654_349_126, "order.7:retry/1".into()),
                Position::Skip(3),
                Position::End,
            ],
        };
        let text = cursor.to_string();
        assert!(!text.contains("order"), "the id goes in hex: {text}");
        assert_eq!(Cursor::parse(&text), Ok(cursor));
        assert!(Cursor::parse("d12-zz").is_err());
        assert!(Cursor::parse("d12-ff").is_err(), "not UTF-8");
    }
}
