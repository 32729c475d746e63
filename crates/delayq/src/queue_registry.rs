//! The registry of queue names (`dq:queues`, a set outside every hash tag), which lists the
//! queues without walking the keyspace, and its upgrade step: the queues made before it
//! existed are found by one walk, once per Redis.

use crate::connection;
use crate::error::Result;
use crate::keys::Keys;
use crate::names::QueueName;

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
    for node in ordinary.scan_targets().await? {
        let mut cursor = 0u64;
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(Keys::scan_pattern())
                .arg("COUNT")
                .arg(1000);
            let (next, keys): (u64, Vec<String>) = ordinary.query_on(&node, &scan).await?;
            names.extend(keys.iter().filter_map(|k| Keys::queue_of(k)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
    }
    Ok(names.into_iter().collect())
}
