//! Which messages wait in buckets rather than in a pending set: the client's copy of the
//! rule in the scripts' bucket helpers, for the batch path that builds records itself
//! (`send_generated.rs`). A message due far enough ahead is kept in a plain list per 100 ms
//! of due times until shortly before it is due, which costs Redis about half the memory of a
//! sorted set member and keeps sends fast however many are pending (BENCHMARKS.md, W6).

use std::collections::BTreeSet;
use std::sync::Mutex;

/// The first data format with buckets: an older delayq would not look in them.
pub(crate) const BUCKET_FORMAT: u32 = 5;

/// How far ahead (ms) a claim moves buckets into the pending sets, unless the partition's
/// control field `bucket_horizon_ms` says otherwise.
pub(crate) const HORIZON_MS: u64 = 60_000;

/// The width (ms) of a bucket's due times.
const BUCKET_MS: u64 = 100;

/// The start (ms) of the bucket of a message due at `due_us`.
pub(crate) fn bucket_start(due_us: u64) -> u64 {
    let due_ms = due_us / 1000;
    due_ms - due_ms % BUCKET_MS
}

/// Whether a message due at `due_us` goes to a bucket at `now_us` (both µs of the server's
/// clock), as `far_enough` in the scripts' bucket helpers decides.
pub(crate) fn far_enough(format: u32, horizon_ms: u64, due_us: u64, now_us: u64) -> bool {
    format >= BUCKET_FORMAT && bucket_start(due_us) > now_us / 1000 + horizon_ms
}

/// The buckets that a batch of this process found full (the batch script names them), by
/// partition and start: a burst of messages due at one time fills its bucket after 1,000, and
/// the rest of it goes to the pending set. Knowing that here, a batch sends those records to
/// the set itself, through the transaction without Lua, instead of through the script that
/// would send them there anyway. A bucket taken for full that is not (a claim moved it, a
/// cancel emptied it) only means its records go to the set: always a valid place.
#[derive(Default)]
pub(crate) struct FullBuckets {
    seen: Mutex<BTreeSet<(usize, u64)>>,
}

impl FullBuckets {
    /// At most this many are remembered (the oldest forgotten first).
    const MAX: usize = 4096;

    pub(crate) fn contains(&self, partition: usize, start: u64) -> bool {
        self.lock().contains(&(partition, start))
    }

    /// Notes buckets of `partition` found full, forgetting those that started before
    /// `now_ms` (moved, or soon to be).
    pub(crate) fn note(&self, partition: usize, starts: &[u64], now_ms: u64) {
        if starts.is_empty() {
            return;
        }
        let mut seen = self.lock();
        seen.retain(|&(_, start)| start >= now_ms);
        seen.extend(starts.iter().map(|&start| (partition, start)));
        while seen.len() > Self::MAX {
            seen.pop_first();
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeSet<(usize, u64)>> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner())
    }
}
