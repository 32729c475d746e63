//! Dead letters: messages that used up their attempts, kept for a person to inspect,
//! requeue or purge. Nothing expires them.

use crate::error::Result;
use crate::message::DeadLetter;
use crate::queue::{check_count, Queue};
use crate::record;

/// Offsets from here on are past the end of any page: 2^53 is where Lua's numbers stop being
/// exact integers.
const MAX_OFFSET: u64 = 1 << 53;

/// Most dead letters one script call reads or moves. Each costs Redis 10-15 µs (read, parse,
/// move: `delayq-bench slowlog`), so a call holds Redis for a millisecond or two however many
/// dead letters there are; a call of 1,000 held it for 10-15 ms.
const CHUNK: usize = 100;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;

/// The dead letters of one queue.
pub struct DeadLetters<'a> {
    queue: &'a Queue,
}

impl<'a> DeadLetters<'a> {
    pub(crate) fn new(queue: &'a Queue) -> Self {
        DeadLetters { queue }
    }

    /// How many there are.
    pub async fn count(&self) -> Result<u64> {
        let mut conn = self.queue.connection();
        let n: u64 = redis::cmd("ZCARD")
            .arg(self.queue.keys().dead())
            .query_async(&mut conn)
            .await?;
        Ok(n)
    }

    /// One page, oldest death first: `limit` (1 to 1000) entries from `offset`. Read in
    /// calls of at most 100, so a page is not one snapshot: a death or requeue meanwhile may
    /// shift it by that many.
    pub async fn list(&self, offset: u64, limit: usize) -> Result<Vec<DeadLetter>> {
        check_count("a page", limit)?;
        let mut out = Vec::with_capacity(limit);
        while out.len() < limit {
            let want = (limit - out.len()).min(CHUNK);
            let before = out.len();
            self.list_chunk(offset + before as u64, want, &mut out)
                .await?;
            if out.len() - before < want {
                break;
            }
        }
        Ok(out)
    }

    async fn list_chunk(&self, offset: u64, limit: usize, out: &mut Vec<DeadLetter>) -> Result<()> {
        if offset >= MAX_OFFSET {
            // No queue holds that many; and Lua would turn the number into a float that
            // Redis refuses as an index.
            return Ok(());
        }
        let mut inv = self.queue.invocation(&SCRIPTS.dead_list);
        inv.arg(offset).arg(limit);
        let mut r = Reply::new(self.queue.invoke(&inv).await?)?;
        while r.remaining() > 0 {
            let (id, died_at_ms) = (r.string()?, r.uint()?);
            let (attempts, max_attempts) = (r.uint()? as u32, r.uint()? as u32);
            let (last_error, errors) = crate::error_history::read(r.opt_bytes()?);
            out.push(DeadLetter {
                id,
                died_at_ms,
                attempts,
                max_attempts,
                last_error,
                errors,
                payload: r.bytes()?,
                kind: record::kind_of(r.uint()? as u8),
            });
        }
        Ok(())
    }

    /// Puts one dead letter back as ready now, with its attempts reset. Returns false when
    /// there is no dead letter with this id.
    pub async fn requeue(&self, id: &str) -> Result<bool> {
        crate::names::check_lookup_id(id)?;
        Ok(self.run(&SCRIPTS.dead_requeue, "id", id).await? == 1)
    }

    /// Requeues every dead letter; returns how many. Works in atomic chunks of up to 100,
    /// so dead letters added meanwhile may be included.
    pub async fn requeue_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_requeue).await
    }

    /// Deletes one dead letter for good. Returns false when there is none with this id.
    pub async fn purge(&self, id: &str) -> Result<bool> {
        crate::names::check_lookup_id(id)?;
        Ok(self.run(&SCRIPTS.dead_purge, "id", id).await? == 1)
    }

    /// Deletes every dead letter; returns how many. Works in atomic chunks of up to 100.
    pub async fn purge_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_purge).await
    }

    async fn drain(&self, script: &redis::Script) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = self.run(script, "oldest", &CHUNK.to_string()).await?;
            total += n;
            if n < CHUNK as u64 {
                return Ok(total);
            }
        }
    }

    async fn run(&self, script: &redis::Script, mode: &str, arg: &str) -> Result<u64> {
        let mut inv = self.queue.invocation(script);
        inv.arg(mode).arg(arg);
        let value = self.queue.invoke(&inv).await?;
        match value {
            redis::Value::Int(n) if n >= 0 => Ok(n as u64),
            other => Err(crate::Error::Protocol(format!(
                "expected a count, got {other:?}"
            ))),
        }
    }
}
