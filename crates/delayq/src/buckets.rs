//! Which messages wait in buckets rather than in a pending set: the client's copy of the
//! rule in `scripts/buckets.lua`, for the batch path that builds records itself
//! (`send_generated.rs`). A message due far enough ahead is kept in a plain list per 100 ms
//! of due times until shortly before it is due, which costs Redis about half the memory of a
//! sorted set member and keeps sends fast however many are pending (BENCHMARKS.md, W6).

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
/// clock), as `far_enough` in buckets.lua decides.
pub(crate) fn far_enough(format: u32, horizon_ms: u64, due_us: u64, now_us: u64) -> bool {
    format >= BUCKET_FORMAT && bucket_start(due_us) > now_us / 1000 + horizon_ms
}
