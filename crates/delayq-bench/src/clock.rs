//! The one clock of the benchmark (WORKLOADS.md "Clock"): the wall clock, CLOCK_REALTIME, as
//! f64 milliseconds since the Unix epoch. Every process reads it, so lateness can be computed
//! across processes.

use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time in ms since the Unix epoch, with sub-microsecond resolution.
pub fn now_ms() -> f64 {
    // A clock before 1970 would be a broken machine; 0 makes every number visibly absurd
    // rather than crashing a run.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_nanos() as f64 / 1e6)
}
