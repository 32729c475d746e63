//! A queue's delete ([`Queue::delete`](crate::Queue::delete)): its keys removed in bounded
//! batches, its settings cleared, and its name taken out of the registries.
//!
//! The keys are found with `SCAN` (on every master of a cluster) under the queue's hash tags,
//! [`BATCH`] keys to a call of `drop_keys.lua`, so that no call's work grows with the queue.
//! Each call counts the messages its partition holds first: a delete without `force`
//! removes nothing from a partition that holds any, and stops with [`Error::NotEmpty`] (a
//! message sent while it runs is kept, and so is the queue). Two things are kept on purpose:
//! each partition's count key and its data format (one field of its control hash), so that a
//! client that used the queue before, with both cached, still writes in the format the data
//! says. A send after the delete starts the queue again, with default settings.

use std::collections::HashMap;
use std::sync::Arc;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::key_scan::KeyScan;
use crate::store::keys::Keys;
use crate::store::scripts::SCRIPTS;
use crate::values::error::{Error, Result};
use crate::values::reply::Reply;

/// Most keys deleted by one call.
const BATCH: usize = 500;

/// What [`Queue::delete`](crate::Queue::delete) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Deleted {
    /// Messages deleted with the queue (pending, in flight and dead; 0 unless forced).
    pub messages: u64,
    /// Redis keys deleted.
    pub keys: u64,
    /// The queue was there to delete: listed, or holding keys (false for a name never used).
    pub existed: bool,
    /// A message was sent while the delete ran (after its last batch): the queue was started
    /// again with it, and is listed again.
    pub raced: bool,
}

/// [`Queue::delete`](crate::Queue::delete).
pub(crate) async fn delete(core: &QueueCore, force: bool) -> Result<Deleted> {
    if !exists(core).await? {
        // A name never used: nothing to walk or scan, and nothing written.
        return Ok(Deleted::default());
    }
    let held = held(core).await?;
    if held > 0 && !force {
        return Err(not_empty(core, held));
    }
    let mut conn = core.connection();
    // Schedulers stop firing its schedules before they are deleted.
    let _: i64 = redis::cmd("SREM")
        .arg(Keys::SCHEDULED_QUEUES)
        .arg(core.name().as_str())
        .query_async(&mut conn)
        .await?;
    let layout = core.known_layout().await?;
    let parts: Vec<Arc<Keys>> = layout.parts().to_vec();
    let mode = if force { "force" } else { "empty" };
    let mut deleted = Deleted::default();
    let mut waiting: HashMap<usize, Vec<String>> = HashMap::new();
    let mut scan = KeyScan::new(core.ordinary(), Keys::queue_pattern(core.name())).await?;
    while let Some(keys) = scan.next_page().await? {
        for key in keys {
            let Some(part) = parts.iter().position(|p| key.starts_with(p.prefix())) else {
                continue;
            };
            if key == parts[part].control() || key == Keys::partitions(core.name()) {
                continue;
            }
            let batch = waiting.entry(part).or_default();
            batch.push(key);
            if batch.len() >= BATCH {
                let keys = std::mem::take(batch);
                drop_batch(core, &parts[part], mode, &keys, false, &mut deleted).await?;
            }
        }
    }
    for (n, part) in parts.iter().enumerate() {
        let keys = waiting.remove(&n).unwrap_or_default();
        drop_batch(core, part, mode, &keys, true, &mut deleted).await?;
    }
    if deleted.keys > 0 {
        // Only when it had keys (a walk finds a queue by its kept ones): a delete of a name
        // never used writes nothing.
        crate::store::queue_registry::ensure_walked(core.ordinary()).await?;
    }
    let listed: i64 = redis::cmd("SREM")
        .arg(Keys::QUEUES)
        .arg(core.name().as_str())
        .query_async(&mut conn)
        .await?;
    // This client's handles learnt the layout, which outlives the delete: their next send
    // lists the queue again, as a send from a process new to it does.
    core.mark_unlisted();
    deleted.existed = listed == 1 || deleted.keys > 0;
    // A send that came after the last batch started the queue again: list it again.
    if self::held(core).await? > 0 {
        let _: i64 = redis::cmd("SADD")
            .arg(Keys::QUEUES)
            .arg(core.name().as_str())
            .query_async(&mut conn)
            .await?;
        deleted.raced = true;
    }
    deleted.messages = held;
    Ok(deleted)
}

/// Whether the queue was ever used: it is listed, or it has a partition count, a sequence
/// key (made before partitions existed) or settings.
async fn exists(core: &QueueCore) -> Result<bool> {
    let mut conn = core.connection();
    let listed: bool = redis::cmd("SISMEMBER")
        .arg(Keys::QUEUES)
        .arg(core.name().as_str())
        .query_async(&mut conn)
        .await?;
    if listed {
        return Ok(true);
    }
    // All under partition 0's hash tag: one slot. Its settings hash is there once anything
    // configured it (a push target, a pause) or stamped its data format.
    let first = Keys::new(core.name().as_str());
    let found: u64 = redis::cmd("EXISTS")
        .arg(Keys::partitions(core.name()))
        .arg(first.seq())
        .arg(first.control())
        .query_async(&mut conn)
        .await?;
    Ok(found > 0)
}

/// Messages the queue holds: pending, in flight and dead.
async fn held(core: &QueueCore) -> Result<u64> {
    Ok(crate::handles::stats::stats(core).await?.held())
}

fn not_empty(core: &QueueCore, messages: u64) -> Error {
    Error::NotEmpty {
        queue: core.name().as_str().to_owned(),
        messages,
    }
}

/// One call of `drop_keys.lua` on partition `part`: `keys` deleted, and with `settings` its
/// settings cleared; without `force`, nothing while it holds messages.
async fn drop_batch(
    core: &QueueCore,
    part: &Keys,
    mode: &str,
    keys: &[String],
    settings: bool,
    deleted: &mut Deleted,
) -> Result<()> {
    let mut inv = invocation(part, &SCRIPTS.drop_keys);
    for key in keys {
        inv.key(key);
    }
    inv.arg(mode).arg(if settings { "1" } else { "0" });
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let (held, removed) = (r.uint()?, r.uint()?);
    if mode == "empty" && held > 0 {
        return Err(not_empty(core, held));
    }
    deleted.keys += removed;
    Ok(())
}
