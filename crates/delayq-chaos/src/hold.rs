//! One handler's hold on a delivery, as the checker rebuilds it from the history: what
//! `checker.rs` and `group_checks.rs` both read.

use crate::history::Outcome;

/// One handler's hold on a delivery.
pub struct Hold {
    pub pid: u32,
    pub token: String,
    pub start: u64,
    pub end: Option<u64>,
    pub outcome: Option<Outcome>,
    pub early: bool,
    /// The message's sequence number, which names its partition.
    pub seq: Option<u64>,
    /// When this delivery was due (ms).
    pub due_ms: u64,
}
