//! A queue's delete as the server and the CLI do it: the library's
//! ([`delayq::Queue::delete`]: its keys, settings and registry entry), then what the server
//! keeps of a queue outside its keys: its place in the push index and its webhooks with
//! their places. Both paths call this, so a queue deleted from a laptop's CLI leaves
//! nothing behind either.

use delayq::{DelayQ, Deleted, Queue};
use serde::Serialize;
use utoipa::ToSchema;

/// What a delete did, as the API answers it and `delayq delete-queue --json` prints it.
#[derive(Serialize, ToSchema)]
pub struct DeletedOut {
    queue: String,
    /// Messages deleted with it (0 unless forced).
    messages: u64,
    /// Redis keys deleted.
    keys: u64,
    /// A message was sent while the delete ran: the queue started again with it, and is
    /// listed again. Stop its producers first.
    raced: bool,
}

impl DeletedOut {
    /// `deleted`, of the queue `queue`.
    pub fn new(queue: &str, deleted: &Deleted) -> Self {
        DeletedOut {
            queue: queue.to_owned(),
            messages: deleted.messages,
            keys: deleted.keys,
            raced: deleted.raced,
        }
    }
}

/// Deletes `queue` (with `force`, its messages too; without it, a queue that holds any is
/// refused with [`delayq::Error::NotEmpty`] and nothing is touched).
pub async fn delete_queue(dq: &DelayQ, queue: &Queue, force: bool) -> delayq::Result<Deleted> {
    let deleted = queue.delete(force).await?;
    crate::push::target::forget(dq, queue.name()).await?;
    crate::webhooks::config::remove(dq, queue.name()).await?;
    Ok(deleted)
}
