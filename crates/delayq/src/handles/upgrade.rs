//! A queue's data format, partition by partition, and its upgrade to the newest format this
//! delayq reads: the step that the rule of `formats.rs` allows once no process that reads
//! only older formats is running.
//!
//! The upgrade rewrites no record: each format so far reads its predecessor's records as
//! they are (`record.rs`), so it stamps each partition's control hash, one atomic step per
//! partition, while deliveries go on. A crash half-way leaves some partitions stamped and
//! the rest not; running it again finishes the rest. A queue created while no older process
//! is running is stamped from the start.

use crate::handles::queue_core::QueueCore;
use crate::store::formats::{DATA_FORMAT, FIRST_FORMAT};
use crate::store::partitions::Layout;
use crate::values::error::{Error, Result};

/// The data format of a queue's partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueFormat {
    /// The format of each partition's data, in partition order; empty for a queue not used
    /// yet (it has no data, and is stamped when it is created).
    pub partitions: Vec<u32>,
}

impl QueueFormat {
    /// The format the queue is in: the oldest of its partitions'.
    pub fn format(&self) -> u32 {
        self.partitions.iter().copied().min().unwrap_or(DATA_FORMAT)
    }

    /// How many partitions are of the newest format this delayq reads, out of
    /// [`partitions`](Self::partitions)' count: the upgrade's progress.
    pub fn upgraded(&self) -> usize {
        self.partitions
            .iter()
            .filter(|f| **f >= DATA_FORMAT)
            .count()
    }

    /// Whether every partition is of the newest format this delayq reads.
    pub fn is_current(&self) -> bool {
        self.upgraded() == self.partitions.len()
    }
}

/// The format of each partition of the queue, as Redis holds it now.
pub(crate) async fn read(core: &QueueCore) -> Result<QueueFormat> {
    let Some(layout) = recorded_layout(core).await? else {
        return Ok(QueueFormat { partitions: vec![] });
    };
    let mut conn = core.connection();
    let mut partitions = Vec::with_capacity(layout.count());
    for keys in layout.parts() {
        let named: Option<String> = redis::cmd("HGET")
            .arg(keys.control())
            .arg("format")
            .query_async(&mut conn)
            .await?;
        let format = match named {
            None => FIRST_FORMAT,
            Some(f) => f.parse().map_err(|_| Error::NewerFormat {
                found: f,
                supported: DATA_FORMAT,
            })?,
        };
        partitions.push(format);
    }
    Ok(QueueFormat { partitions })
}

/// Upgrades the queue's data to [`DATA_FORMAT`]: refused ([`Error::OlderProcesses`]) while
/// a process that reads only older formats is running, or was less than a lease ago.
pub(crate) async fn upgrade(core: &QueueCore) -> Result<QueueFormat> {
    if let Some(layout) = recorded_layout(core).await? {
        core.stamp_format(&layout).await?;
    }
    read(core).await
}

/// The queue's partitions if it has recorded them (it has been used), else `None`.
async fn recorded_layout(core: &QueueCore) -> Result<Option<std::sync::Arc<Layout>>> {
    if core.record_partitions(None).await?.0.is_none() {
        return Ok(None);
    }
    Ok(Some(core.known_layout().await?))
}
