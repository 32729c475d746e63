//! The registry of queue names (`dq:queues`, a set outside every hash tag), which lists the
//! queues without walking the keyspace, and its upgrade step: the queues made before it
//! existed are found by one walk, once per Redis.

use crate::store::connection;
use crate::store::key_scan::KeyScan;
use crate::store::keys::Keys;
use crate::values::error::Result;
use crate::values::names::QueueName;

/// Registers the queues made before the registry existed, once per Redis: found by one walk
/// of the keyspace, then marked done. Before the queues are listed, and before a queue is
/// taken out of the registry (a later walk would find its kept keys and list it again).
pub(crate) async fn ensure_walked(ordinary: &connection::Ordinary) -> Result<()> {
    let mut conn = ordinary.get();
    let walked: bool = redis::cmd("EXISTS")
        .arg(Keys::QUEUES_WALKED)
        .query_async(&mut conn)
        .await?;
    if walked {
        return Ok(());
    }
    let found = walk_queues(ordinary).await?;
    if !found.is_empty() {
        let _: i64 = redis::cmd("SADD")
            .arg(Keys::QUEUES)
            .arg(found.iter().map(QueueName::as_str).collect::<Vec<_>>())
            .query_async(&mut conn)
            .await?;
    }
    // Only once they are in: a walk cut short is done again by the next listing.
    let _: () = redis::cmd("SET")
        .arg(Keys::QUEUES_WALKED)
        .arg(1)
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Every queue that has keys, found by walking the keyspace with `SCAN` (of every master, on
/// a cluster): the registry's upgrade step.
async fn walk_queues(ordinary: &connection::Ordinary) -> Result<Vec<QueueName>> {
    let mut names = std::collections::BTreeSet::new();
    let mut scan = KeyScan::new(ordinary, Keys::scan_pattern().to_owned()).await?;
    while let Some(keys) = scan.next_page().await? {
        names.extend(keys.iter().filter_map(|k| Keys::queue_of(k)));
    }
    Ok(names.into_iter().collect())
}
