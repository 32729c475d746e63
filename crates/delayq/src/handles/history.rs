//! A queue's recent history, minute by minute: how many messages were sent, delivered, acked,
//! failed and dead-lettered, and how late deliveries were, for the dashboard's charts.
//!
//! The scripts that change state count as they go (`add_history` in prelude.lua), into a small
//! hash per partition and minute of the Redis server's clock that expires after 25 hours. So
//! the history survives restarts of every client, every server sees the same, and it costs
//! a few `HINCRBY`s per script call, not per message. This module reads it back.

use std::collections::BTreeMap;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::partitions::join_all;
use crate::values::error::{InvalidInput, Result};

/// The most minutes [`Queue::history`] reads at once (a day, and an hour to spare).
pub const MAX_HISTORY_MINUTES: usize = 1500;

/// One minute of a queue's history.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Minute {
    /// When the minute began, ms since the Unix epoch (Redis server's clock).
    pub start_ms: u64,
    /// Messages accepted (duplicates not counted).
    pub sent: u64,
    /// Deliveries: messages claimed by a consumer (a redelivery counts again).
    pub delivered: u64,
    /// Deliveries acked.
    pub acked: u64,
    /// Deliveries that failed (nacked, or their lease ran out), whether retried or not.
    pub failed: u64,
    /// Messages that became dead letters.
    pub dead_lettered: u64,
    /// Messages that expired ([`SendOptions::ttl`](crate::SendOptions::ttl)): dead-lettered
    /// (counted in `dead_lettered` too) or dropped.
    pub expired: u64,
    /// How late the minute's deliveries were.
    pub lateness: Lateness,
    /// Push deliveries' answers by class: 1xx, 2xx, 3xx, 4xx, 5xx, and no answer (timeout,
    /// refused connection...), as servers report them ([`Queue::add_push_responses`]).
    pub push_responses: [u64; 6],
}

/// A histogram of how late deliveries were (claim time minus due time, by the Redis server's
/// clock): four buckets per doubling, so a quantile is known within 19 %.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Lateness {
    buckets: BTreeMap<u32, u64>,
}

impl Lateness {
    /// Deliveries counted.
    pub fn count(&self) -> u64 {
        self.buckets.values().sum()
    }

    /// The lateness in ms that a share `q` (0 to 1) of the deliveries did not exceed, given
    /// as the upper end of its bucket; `None` without deliveries.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        // Nearest rank: the ceil(q * total)-th delivery, at least the first.
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&bucket, &n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return Some(bucket_end_ms(bucket));
            }
        }
        self.buckets.keys().last().map(|&b| bucket_end_ms(b))
    }

    /// Adds `other`'s deliveries to these.
    pub fn merge(&mut self, other: &Lateness) {
        for (&b, &n) in &other.buckets {
            *self.buckets.entry(b).or_default() += n;
        }
    }
}

/// Where lateness bucket `b` ends, in ms: 1 ms for bucket 0, then 2^(b/4).
fn bucket_end_ms(b: u32) -> f64 {
    if b == 0 {
        1.0
    } else {
        2f64.powf(f64::from(b) / 4.0)
    }
}

impl Minute {
    fn add(&mut self, other: &Minute) {
        self.sent += other.sent;
        self.delivered += other.delivered;
        self.acked += other.acked;
        self.failed += other.failed;
        self.dead_lettered += other.dead_lettered;
        self.expired += other.expired;
        self.lateness.merge(&other.lateness);
        for (mine, theirs) in self.push_responses.iter_mut().zip(other.push_responses) {
            *mine += theirs;
        }
    }

    fn from_fields(start_ms: u64, fields: BTreeMap<String, u64>) -> Minute {
        let mut m = Minute {
            start_ms,
            ..Minute::default()
        };
        for (field, n) in fields {
            match field.as_str() {
                "s" => m.sent = n,
                "d" => m.delivered = n,
                "a" => m.acked = n,
                "f" => m.failed = n,
                "x" => m.dead_lettered = n,
                "e" => m.expired = n,
                "pe" => m.push_responses[5] = n,
                "p1" | "p2" | "p3" | "p4" | "p5" => {
                    let class = usize::from(field.as_bytes()[1] - b'1');
                    m.push_responses[class] = n;
                }
                other => {
                    if let Some(b) = other.strip_prefix('l').and_then(|b| b.parse().ok()) {
                        m.lateness.buckets.insert(b, n);
                    }
                }
            }
        }
        m
    }
}

/// The history fields of push answers, by class (as [`Minute::push_responses`]).
const PUSH_FIELDS: [&str; 6] = ["p1", "p2", "p3", "p4", "p5", "pe"];

/// [`Queue::add_push_responses`](crate::Queue::add_push_responses).
pub(crate) async fn add_push_responses(core: &QueueCore, counts: &[u64; 6]) -> Result<()> {
    if counts.iter().all(|&n| n == 0) {
        return Ok(());
    }
    let layout = core.known_layout().await?;
    let mut inv = invocation(layout.part(0), &crate::store::scripts::SCRIPTS.add_history);
    for (field, n) in PUSH_FIELDS.iter().zip(counts) {
        if *n > 0 {
            inv.arg(*field).arg(*n);
        }
    }
    core.invoke(&inv).await?;
    Ok(())
}

/// [`Queue::history`](crate::Queue::history).
pub(crate) async fn history(core: &QueueCore, minutes: usize) -> Result<Vec<Minute>> {
    if minutes == 0 || minutes > MAX_HISTORY_MINUTES {
        return Err(InvalidInput::Option(format!(
            "history covers 1 to {MAX_HISTORY_MINUTES} minutes, not {minutes}"
        ))
        .into());
    }
    let layout = core.known_layout().await?;
    let mut conn = core.connection();
    let (secs, _micros): (u64, u64) = redis::cmd("TIME").query_async(&mut conn).await?;
    let now_minute = secs / 60;
    let first = now_minute + 1 - minutes as u64;
    let reads = layout.parts().iter().map(|keys| async move {
        let mut pipe = redis::pipe();
        for minute in first..=now_minute {
            pipe.cmd("HGETALL").arg(keys.history(minute));
        }
        let mut conn = core.connection();
        let hashes: Vec<BTreeMap<String, u64>> = pipe.query_async(&mut conn).await?;
        Ok::<_, crate::values::error::Error>(hashes)
    });
    let mut out: Vec<Minute> = (first..=now_minute)
        .map(|minute| Minute {
            start_ms: minute * 60_000,
            ..Minute::default()
        })
        .collect();
    for part in join_all(reads).await {
        for (slot, fields) in out.iter_mut().zip(part?) {
            slot.add(&Minute::from_fields(slot.start_ms, fields));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_come_from_the_bucket_that_holds_the_rank() {
        let mut l = Lateness::default();
        assert_eq!(l.quantile(0.5), None);
        // 98 deliveries under 1 ms, one in bucket 4 (1.7-2 ms), one in bucket 40 (861-1024 ms).
        l.buckets.insert(0, 98);
        l.buckets.insert(4, 1);
        l.buckets.insert(40, 1);
        assert_eq!(l.quantile(0.5), Some(1.0));
        assert_eq!(l.quantile(0.99), Some(2.0));
        assert_eq!(l.quantile(1.0), Some(1024.0));
        let mut m = l.clone();
        m.merge(&l);
        assert_eq!(m.count(), 200);
        assert_eq!(m.quantile(0.99), Some(2.0));
    }
}
