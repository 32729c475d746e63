//! A queue's push target (for the server that pushes its messages: the library keeps it, never
//! reads it), changed together with [`Setting::PushDelivery`](crate::Setting::PushDelivery).
//!
//! The target lives at `dq:{q}:push`, under partition 0's hash tag, and one script call
//! (`push_target.lua`) changes it with partition 0's push-delivery flag, so the two never
//! disagree there. The flags of partitions 1.. are in other slots (other nodes of a
//! cluster), so they cannot change in the same step: they follow partition 0's right after.
//! A failure before partition 0's step changes nothing; one after it leaves some of
//! partitions 1.. behind, which [`Queue::sync_push_delivery`](crate::Queue::sync_push_delivery) repairs (the server's push
//! runtime calls it for every queue it finds in its index).

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::keys::Keys;
use crate::store::partitions::{join_all, Layout};
use crate::store::scripts::SCRIPTS;
use crate::values::error::Result;
use crate::values::reply::Reply;

/// How many times [`Queue::sync_push_delivery`](crate::Queue::sync_push_delivery) reads the target again when it changed while
/// the flags were being written.
const SYNC_ROUNDS: usize = 3;

/// [`Queue::push_target`](crate::Queue::push_target).
pub(crate) async fn get(core: &QueueCore) -> Result<Option<String>> {
    let mut conn = core.connection();
    let target: Option<String> = redis::cmd("GET")
        .arg(Keys::push_target(core.name()))
        .query_async(&mut conn)
        .await?;
    Ok(target)
}

/// [`Queue::set_push_target`](crate::Queue::set_push_target).
pub(crate) async fn set(core: &QueueCore, target: &str) -> Result<()> {
    let layout = core.layout().await?;
    push_target_call(core, &layout, "set", Some(target)).await?;
    follow(core, &layout, true).await
}

/// [`Queue::remove_push_target`](crate::Queue::remove_push_target).
pub(crate) async fn remove(core: &QueueCore) -> Result<bool> {
    // Not `layout()`: that would record a partition count for a queue never used.
    let layout = core.known_layout().await?;
    let (_, had) = push_target_call(core, &layout, "remove", None).await?;
    if had {
        follow(core, &layout, false).await?;
    }
    Ok(had)
}

/// [`Queue::sync_push_delivery`](crate::Queue::sync_push_delivery).
pub(crate) async fn sync(core: &QueueCore) -> Result<bool> {
    let layout = core.known_layout().await?;
    let (has, _) = push_target_call(core, &layout, "sync", None).await?;
    follow(core, &layout, has).await?;
    Ok(has)
}

/// Partitions 1..'s flags set to `has`, partition 0's state when it was read. A target
/// set or removed meanwhile (by another client) is read again, so the flags end as the
/// last change left partition 0.
async fn follow(core: &QueueCore, layout: &Layout, mut has: bool) -> Result<()> {
    if layout.count() == 1 {
        return Ok(());
    }
    for _ in 0..SYNC_ROUNDS {
        let value = if has { "1" } else { "" };
        let calls: Vec<_> = layout.parts()[1..]
            .iter()
            .map(|keys| {
                let mut inv = invocation(keys, &SCRIPTS.control);
                inv.arg("push").arg(value);
                inv
            })
            .collect();
        for reply in join_all(calls.iter().map(|inv| core.invoke(inv))).await {
            reply?;
        }
        let (now, _) = push_target_call(core, layout, "sync", None).await?;
        if now == has {
            return Ok(());
        }
        has = now;
    }
    tracing::warn!(queue = %core.name(), "push target changing under us; the flags follow it at the next sync");
    Ok(())
}

/// `push_target.lua` on partition 0: whether the queue has a target after the call, and
/// whether it had one before.
async fn push_target_call(
    core: &QueueCore,
    layout: &Layout,
    op: &str,
    target: Option<&str>,
) -> Result<(bool, bool)> {
    let mut inv = invocation(layout.part(0), &SCRIPTS.push_target);
    inv.key(Keys::push_target(core.name())).arg(op);
    if let Some(target) = target {
        inv.arg(target);
    }
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    Ok((r.uint()? == 1, r.uint()? == 1))
}
