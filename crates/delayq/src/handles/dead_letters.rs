//! Dead letters: messages that used up their attempts, kept for a person to inspect,
//! requeue or purge. Nothing expires them.
//!
//! Each partition of a queue keeps its own; this view adds them up, and lists them merged
//! into one order of death.

use crate::handles::queue_core::{invocation, QueueCore};
use crate::handles::sealed;
use crate::store::keys::Keys;
use crate::store::partitions::join_all;
use crate::values::error::Result;
use crate::values::message::DeadLetter;
use crate::values::options::check_count;
use crate::values::record;

/// Offsets from here on are past the end of any page: 2^53 is where Lua's numbers stop being
/// exact integers.
const MAX_OFFSET: u64 = 1 << 53;

/// Most dead letters one script call reads or moves. Each costs Redis 10-15 µs (read, parse,
/// move: `delayq-bench slowlog`), so a call holds Redis for a millisecond or two however many
/// dead letters there are; a call of 1,000 held it for 10-15 ms.
const CHUNK: usize = 100;
use crate::store::scripts::{QueueScript, SCRIPTS};
use crate::values::reply::Reply;

/// The dead letters of one queue.
pub struct DeadLetters<'a> {
    queue: &'a QueueCore,
}

impl<'a> DeadLetters<'a> {
    pub(crate) fn new(queue: &'a QueueCore) -> Self {
        DeadLetters { queue }
    }

    /// How many there are.
    pub async fn count(&self) -> Result<u64> {
        let layout = self.queue.known_layout().await?;
        let counts = layout.parts().iter().map(|keys| async move {
            let mut conn = self.queue.connection();
            let n: u64 = redis::cmd("ZCARD")
                .arg(keys.dead())
                .query_async(&mut conn)
                .await?;
            Ok::<u64, crate::values::error::Error>(n)
        });
        let mut total = 0;
        for n in join_all(counts).await {
            total += n?;
        }
        Ok(total)
    }

    /// One page, oldest death first: `limit` (1 to 1000) entries from `offset`. Read in
    /// calls of at most 100, so a page is not one snapshot: a death or requeue meanwhile may
    /// shift it by that many. On a queue of several partitions, finding where a page starts
    /// reads the death times of the `offset + limit` oldest in each partition (not their
    /// messages), so deep pages cost more there.
    pub async fn list(&self, offset: u64, limit: usize) -> Result<Vec<DeadLetter>> {
        check_count("a page", limit)?;
        let layout = self.queue.known_layout().await?;
        if layout.count() == 1 {
            return self.list_partition(layout.part(0), offset, limit).await;
        }
        if offset >= MAX_OFFSET {
            return Ok(Vec::new());
        }
        // Where the page's entries lie in each partition: the merged order of death is
        // each partition's order interleaved, so a page takes a run from each.
        let end = offset.saturating_add(limit as u64).min(MAX_OFFSET);
        let heads = layout.parts().iter().map(|keys| async move {
            let mut conn = self.queue.connection();
            let scores: Vec<(String, f64)> = redis::cmd("ZRANGE")
                .arg(keys.dead())
                .arg(0)
                .arg(end - 1)
                .arg("WITHSCORES")
                .query_async(&mut conn)
                .await?;
            Ok::<_, crate::values::error::Error>(scores)
        });
        let mut merged = Vec::new();
        for (k, heads) in join_all(heads).await.into_iter().enumerate() {
            merged.extend(heads?.into_iter().map(|(id, died)| (died, k, id)));
        }
        merged.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut runs = vec![(u64::MAX, 0usize); layout.count()];
        let mut skipped = vec![0u64; layout.count()];
        for (i, (_, k, _)) in merged.iter().enumerate() {
            if (i as u64) < offset {
                skipped[*k] += 1;
            } else if (i as u64) < end {
                let run = &mut runs[*k];
                run.0 = run.0.min(skipped[*k]);
                run.1 += 1;
            }
        }
        let pages = runs
            .iter()
            .enumerate()
            .filter(|(_, (_, n))| *n > 0)
            .map(|(k, (from, n))| self.list_partition(layout.part(k), *from, *n));
        let mut page = Vec::with_capacity(limit);
        for part in join_all(pages).await {
            page.extend(part?);
        }
        page.sort_by_key(|d| d.died_at_ms);
        page.truncate(limit);
        Ok(page)
    }

    async fn list_partition(
        &self,
        keys: &Keys,
        offset: u64,
        limit: usize,
    ) -> Result<Vec<DeadLetter>> {
        let mut out = Vec::with_capacity(limit);
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let before = out.len();
            let cut = self
                .list_chunk(keys, offset + before as u64, want, &mut out)
                .await?;
            if !cut && out.len() - before < want {
                break;
            }
        }
        Ok(out)
    }

    async fn list_chunk(
        &self,
        keys: &Keys,
        offset: u64,
        limit: usize,
        out: &mut Vec<DeadLetter>,
    ) -> Result<bool> {
        if offset >= MAX_OFFSET {
            // No queue holds that many; and Lua would turn the number into a float that
            // Redis refuses as an index.
            return Ok(false);
        }
        let mut inv = invocation(keys, &SCRIPTS.dead_list);
        inv.arg(offset).arg(limit);
        let mut r = Reply::new(self.queue.invoke(&inv).await?)?;
        // Whether the call stopped early, its memory budget spent (dead_list.lua).
        let cut = r.uint()? == 1;
        while r.remaining() > 0 {
            let (id, died_at_ms) = (r.string()?, r.uint()?);
            let (attempts, max_attempts) = (r.uint()? as u32, r.uint()? as u32);
            let (last_error, errors) = crate::values::error_history::read(r.opt_bytes()?);
            let (stored, flags, priority) = (r.bytes()?, r.uint()?, r.uint()? as u8);
            let (payload, sealed) = match r.uint()? {
                1 => {
                    let (payload, sealed) = sealed::open_for_reader(self.queue, stored);
                    (payload, Some(sealed))
                }
                _ => (stored, None),
            };
            out.push(DeadLetter {
                id,
                died_at_ms,
                attempts,
                max_attempts,
                last_error,
                errors,
                payload,
                kind: record::kind_of(flags as u8),
                priority,
                sealed,
            });
        }
        Ok(cut)
    }

    /// Puts one dead letter back as ready now, with its attempts reset. Returns false when
    /// there is no dead letter with this id.
    pub async fn requeue(&self, id: &str) -> Result<bool> {
        crate::values::names::check_lookup_id(id)?;
        let layout = self.queue.known_layout().await?;
        let keys = layout.part(layout.for_id(id));
        Ok(self.run(keys, &SCRIPTS.dead_requeue, "id", id).await? == 1)
    }

    /// Requeues every dead letter; returns how many. Works in atomic chunks of up to 100,
    /// so dead letters added meanwhile may be included.
    pub async fn requeue_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_requeue).await
    }

    /// Deletes one dead letter for good. Returns false when there is none with this id.
    pub async fn purge(&self, id: &str) -> Result<bool> {
        crate::values::names::check_lookup_id(id)?;
        let layout = self.queue.known_layout().await?;
        let keys = layout.part(layout.for_id(id));
        Ok(self.run(keys, &SCRIPTS.dead_purge, "id", id).await? == 1)
    }

    /// Deletes every dead letter; returns how many. Works in atomic chunks of up to 100.
    pub async fn purge_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_purge).await
    }

    /// Runs `script` on the oldest in chunks until none are left, partition by partition.
    async fn drain(&self, script: &QueueScript) -> Result<u64> {
        let mut total = 0;
        for keys in self.queue.known_layout().await?.parts() {
            loop {
                let n = self.run(keys, script, "oldest", &CHUNK.to_string()).await?;
                total += n;
                if n < CHUNK as u64 {
                    break;
                }
            }
        }
        Ok(total)
    }

    async fn run(&self, keys: &Keys, script: &QueueScript, mode: &str, arg: &str) -> Result<u64> {
        let mut inv = invocation(keys, script);
        inv.arg(mode).arg(arg);
        let value = self.queue.invoke(&inv).await?;
        match value {
            redis::Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(crate::values::error::Error::Protocol(format!(
                "expected a count, got {other:?}"
            ))),
        }
    }
}
