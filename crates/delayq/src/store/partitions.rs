//! Partitions: one queue spread over several hash tags, so that on a Redis Cluster it can use
//! more than one node.
//!
//! Every other Redis job system keeps a queue under one hash tag, so a queue never outgrows
//! one node. A delayq queue has P partitions (1 by default), each a full copy of the data
//! model (`keys.rs`) under its own tag: partition 0 is `{orders}` (so a queue of one partition
//! is laid out as it always was), partition k is `{orders#k.n}`. The tags are placed so that
//! partition k's slot lies within a few slots of partition 0's slot plus k/P of the slot
//! space: the partitions are as evenly spaced as the slots of a cluster created with its
//! slots split evenly over its masters, so each master gets its share of them. `n` is the
//! first number that puts the tag there, so every client finds the same tags from the name
//! and P alone.
//!
//! P is stored in Redis (`dq:{orders}:partitions`) and fixed when the queue is first used: the
//! first producer, consumer or server that touches a queue records 1 unless the queue was
//! created with more ([`DelayQ::create_queue`](crate::DelayQ::create_queue)). It cannot change
//! afterwards, because it decides where every message lives:
//! * sequence numbers in partition k are k modulo P (`send.lua`; below the priority bits,
//!   `record::LEVEL`), and a message's sequence number is fixed for its life, so any
//!   delivery, receipt or generated id names its partition;
//! * a caller id lives in partition crc16(id) mod P, which is where a duplicate send, a
//!   cancel or a lookup of that id goes.
//!
//! Sends without a caller id go round robin over the partitions. Order (due time, then send
//! order) holds within a partition, not across them.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;

use crate::store::keys::{crc16, slot, Keys};
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::names::{is_generated_id, QueueName};
use crate::values::record::LEVEL;

/// Most partitions of one queue.
pub const MAX_PARTITIONS: u16 = 256;

/// The slots of a Redis Cluster.
const SLOTS: u32 = 16384;

/// How close to its ideal slot a partition is placed.
const PLACEMENT_WINDOW: u32 = 32;

/// A queue's partitions, as every client derives them from its name and P.
pub(crate) struct Layout {
    parts: Vec<Arc<Keys>>,
    /// Round robin for sends without a caller id.
    next: AtomicUsize,
}

impl Layout {
    pub(crate) fn new(name: &QueueName, count: u16) -> Layout {
        let count = count.clamp(1, MAX_PARTITIONS);
        let parts = (0..count)
            .map(|k| Arc::new(Keys::new(&tag(name.as_str(), k, count))))
            .collect();
        Layout {
            parts,
            // Producers that start together should not all begin on partition 0.
            next: AtomicUsize::new(rand::random::<u32>() as usize),
        }
    }

    /// P.
    pub(crate) fn count(&self) -> usize {
        self.parts.len()
    }

    /// The keys of partition `k`.
    pub(crate) fn part(&self, k: usize) -> &Arc<Keys> {
        &self.parts[k]
    }

    pub(crate) fn parts(&self) -> &[Arc<Keys>] {
        &self.parts
    }

    /// The partition for the next message without a caller id.
    pub(crate) fn next(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.count()
    }

    /// The partition of a message by its id: a generated id holds its sequence number, a
    /// caller id is hashed.
    pub(crate) fn for_id(&self, id: &str) -> usize {
        if self.count() == 1 {
            return 0;
        }
        if is_generated_id(id) {
            if let Some(seq) = id.split_once('-').and_then(|(_, s)| s.parse::<u64>().ok()) {
                return (seq % LEVEL % self.count() as u64) as usize;
            }
        }
        self.for_caller_id(id)
    }

    /// The partition a caller id belongs to.
    pub(crate) fn for_caller_id(&self, id: &str) -> usize {
        usize::from(crc16(id.as_bytes())) % self.count()
    }

    /// The partition of a message in flight, by its sequence bytes.
    pub(crate) fn for_seq(&self, seq: [u8; 6]) -> usize {
        let n = seq.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        (n % LEVEL % self.count() as u64) as usize
    }
}

/// The hash tag of partition `k` of `p` of queue `name`.
pub(crate) fn tag(name: &str, k: u16, p: u16) -> String {
    if k == 0 {
        return name.to_owned();
    }
    let first = u32::from(slot(name));
    let target = first + (u32::from(k) * SLOTS + u32::from(p) / 2) / u32::from(p);
    let start = (target + SLOTS - PLACEMENT_WINDOW / 2) % SLOTS;
    // A tag lands in the window with chance 32 / 16384, so this takes about 500 tries (tens
    // of microseconds); the bound is never reached.
    for n in 0..10_000_000u32 {
        let candidate = format!("{name}#{k}.{n}");
        let offset = (u32::from(slot(&candidate)) + SLOTS - start) % SLOTS;
        if offset < PLACEMENT_WINDOW {
            return candidate;
        }
    }
    format!("{name}#{k}.0")
}

/// The positions of `items` by partition (`partition_of` each), partitions in ascending
/// order, each list in input order: one call per entry.
pub(crate) fn group<T>(
    count: usize,
    items: &[T],
    partition_of: impl Fn(&T) -> usize,
) -> Vec<(usize, Vec<usize>)> {
    if count == 1 {
        return vec![(0, (0..items.len()).collect())];
    }
    let mut by_partition: Vec<Vec<usize>> = vec![Vec::new(); count];
    for (i, item) in items.iter().enumerate() {
        by_partition[partition_of(item) % count].push(i);
    }
    by_partition
        .into_iter()
        .enumerate()
        .filter(|(_, positions)| !positions.is_empty())
        .collect()
}

/// Runs `futures` together (on a cluster, partitions on different nodes answer in
/// parallel) and returns their outputs in order.
pub(crate) async fn join_all<F: Future>(futures: impl IntoIterator<Item = F>) -> Vec<F::Output> {
    let futures: Vec<F> = futures.into_iter().collect();
    if futures.len() == 1 {
        let mut out = Vec::with_capacity(1);
        for f in futures {
            out.push(f.await);
        }
        return out;
    }
    let mut running: Vec<Pin<Box<F>>> = futures.into_iter().map(Box::pin).collect();
    let mut done: Vec<Option<F::Output>> = running.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, out) in running.iter_mut().zip(done.iter_mut()) {
            if out.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *out = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// Checks a partition count asked for.
pub(crate) fn check_count(count: u16) -> Result<(), InvalidInput> {
    if !(1..=MAX_PARTITIONS).contains(&count) {
        return Err(InvalidInput::Option(format!(
            "a queue has 1 to {MAX_PARTITIONS} partitions, not {count}"
        )));
    }
    Ok(())
}

/// Reads P as `partitions.lua` returns it (`None`: not recorded).
pub(crate) fn parse_count(value: &redis::Value) -> Result<Option<u16>> {
    let text = match value {
        redis::Value::Nil => return Ok(None),
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::SimpleString(s) => s.clone(),
        redis::Value::Int(n) => n.to_string(),
        other => return Err(Error::Protocol(format!("partition count: {other:?}"))),
    };
    text.trim()
        .parse::<u16>()
        .ok()
        .filter(|p| (1..=MAX_PARTITIONS).contains(p))
        .map(Some)
        .ok_or_else(|| Error::Protocol(format!("stored partition count {text:?} is not valid")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_match_redis() {
        // CLUSTER KEYSLOT values from the Redis Cluster specification.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("bar"), 5061);
        assert_eq!(slot("hello"), 866);
    }

    #[test]
    fn partitions_are_spaced_evenly_over_the_slots() {
        for p in [2u16, 3, 6, 12, 256] {
            let first = f64::from(slot("orders"));
            for k in 0..p {
                let t = tag("orders", k, p);
                let ideal = (first + f64::from(k) * f64::from(SLOTS) / f64::from(p)) % 16384.0;
                let off = (f64::from(slot(&t)) - ideal).rem_euclid(16384.0);
                let distance = off.min(16384.0 - off);
                assert!(
                    distance <= 17.0,
                    "partition {k} of {p}: {t} {distance} slots off"
                );
            }
        }
        assert_eq!(tag("orders", 0, 4), "orders");
        // Deterministic: every client finds the same tags.
        assert_eq!(tag("orders", 3, 6), tag("orders", 3, 6));
    }

    #[test]
    fn ids_route_to_their_partition() {
        let layout = Layout::new(&QueueName::new("q").expect("valid name"), 6);
        assert_eq!(layout.for_id("1763805600123-45"), 45 % 6);
        assert_eq!(layout.for_seq([0, 0, 0, 0, 0, 45]), 45 % 6);
        let caller = layout.for_id("close-1234");
        assert_eq!(caller, layout.for_caller_id("close-1234"));
        assert!(caller < 6);
        let single = Layout::new(&QueueName::new("q").expect("valid name"), 1);
        assert_eq!(single.for_id("close-1234"), 0);
        assert_eq!(single.for_id("1763805600123-45"), 0);
    }
}
