//! Dead letters: messages that used up their attempts, kept for a person to inspect,
//! requeue or purge. Nothing expires them.

use crate::error::Result;
use crate::message::DeadLetter;
use crate::queue::{check_count, Queue, MAX_BATCH};
use crate::record;

/// Offsets from here on are past the end of any page: 2^53 is where Lua's numbers stop being
/// exact integers.
const MAX_OFFSET: u64 = 1 << 53;
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

    /// One page, oldest death first: `limit` (1 to 1000) entries from `offset`.
    pub async fn list(&self, offset: u64, limit: usize) -> Result<Vec<DeadLetter>> {
        check_count("a page", limit)?;
        if offset >= MAX_OFFSET {
            // No queue holds that many; and Lua would turn the number into a float that
            // Redis refuses as an index.
            return Ok(Vec::new());
        }
        let mut inv = self.queue.invocation(&SCRIPTS.dead_list);
        inv.arg(offset).arg(limit);
        let mut r = Reply::new(self.queue.invoke(&inv).await?)?;
        let mut out = Vec::new();
        while r.remaining() > 0 {
            out.push(DeadLetter {
                id: r.string()?,
                died_at_ms: r.uint()?,
                attempts: r.uint()? as u32,
                max_attempts: r.uint()? as u32,
                last_error: r.opt_string()?,
                payload: r.bytes()?,
                kind: record::kind_of(r.uint()? as u8),
            });
        }
        Ok(out)
    }

    /// Puts one dead letter back as ready now, with its attempts reset. Returns false when
    /// there is no dead letter with this id.
    pub async fn requeue(&self, id: &str) -> Result<bool> {
        crate::names::check_lookup_id(id)?;
        Ok(self.run(&SCRIPTS.dead_requeue, "id", id).await? == 1)
    }

    /// Requeues every dead letter; returns how many. Works in atomic chunks of up to 1000,
    /// so dead letters added meanwhile may be included.
    pub async fn requeue_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_requeue).await
    }

    /// Deletes one dead letter for good. Returns false when there is none with this id.
    pub async fn purge(&self, id: &str) -> Result<bool> {
        crate::names::check_lookup_id(id)?;
        Ok(self.run(&SCRIPTS.dead_purge, "id", id).await? == 1)
    }

    /// Deletes every dead letter; returns how many. Works in atomic chunks of up to 1000.
    pub async fn purge_all(&self) -> Result<u64> {
        self.drain(&SCRIPTS.dead_purge).await
    }

    async fn drain(&self, script: &redis::Script) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = self.run(script, "oldest", &MAX_BATCH.to_string()).await?;
            total += n;
            if n < MAX_BATCH as u64 {
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
