//! The one place that names Redis keys, and the Redis Cluster slot each lives in.
//!
//! Every key of a queue partition carries the partition's Redis Cluster hash tag
//! (`dq:{orders}:pending`, `dq:{orders#3.17}:pending`: see `partitions.rs`), so all of a
//! partition's keys live in one slot and every script can touch them atomically, on a single
//! node or in a cluster.

use crate::values::names::QueueName;

/// The keys of one queue partition. Scripts receive [`Keys::all`] as their KEYS, in this
/// order.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    all: [String; 12],
    prefix: String,
    /// The Redis Cluster slot of every key here.
    slot: u16,
}

impl Keys {
    /// The keys under hash tag `tag` (the queue's name for its partition 0).
    pub(crate) fn new(tag: &str) -> Self {
        let prefix = format!("dq:{{{tag}}}:");
        let key = |name: &str| format!("{prefix}{name}");
        Keys {
            all: [
                // ZSET, all scores 0: pending messages (delayed and ready), each member a whole
                // record whose first 13 bytes sort it by (due µs, seq).
                key("pending"),
                // HASH id -> sort key, for pending and in-flight messages whose id does not
                // encode it (caller ids, moved messages).
                key("index"),
                // ZSET lease member -> lease deadline ms: messages in flight, each under its
                // own lease (seq bytes + lease token) or its claim's (token base).
                key("leases"),
                // HASH seq bytes -> lease token + attempts + record: messages in flight.
                key("held"),
                // ZSET id -> died-at ms: dead letters, oldest first.
                key("dead"),
                // HASH id -> record: dead letters.
                key("dead:msgs"),
                // HASH id -> last error text.
                key("errors"),
                // STRING counter: message sequence numbers.
                key("seq"),
                // Shard channel (not a key: nothing is stored) on which scripts wake waiting
                // consumers; passed in KEYS so that it is known to share the queue's slot.
                key("wake"),
                // HASH: the partition's settings (control.lua): `paused`, `window_ms`, `rate`,
                // `burst`, `limit` and the rate limit's `tokens`, `tokens_at`; `levels`, the
                // priorities with a pending set of their own (prelude.lua); and `tick:<name>`,
                // the last tick of a recurring schedule sent here (the schedules handle).
                key("control"),
                // ZSET caller id -> ms until which it stays reserved: ids of messages gone
                // (acked, cancelled, purged) within the queue's idempotency window.
                key("gone"),
                // HASH claim (its token base, 6 bytes) -> live count (u16) + per message of
                // the claim seq (6 bytes) + flags byte, zeroed once settled: the messages
                // held under one lease per claim (data format 6, leases.lua's
                // claim_leases); that lease is the claim's member in `leases`.
                key("claims"),
            ],
            prefix,
            slot: slot(tag),
        }
    }

    /// STRING under a queue's own name (partition 0's tag): its partition count, P.
    pub(crate) fn partitions(queue: &QueueName) -> String {
        format!("dq:{{{}}}:partitions", queue.as_str())
    }

    /// HASH under a queue's own name: the definition of its recurring schedule `name`
    /// (the schedules handle).
    pub(crate) fn schedule(queue: &QueueName, name: &str) -> String {
        format!("dq:{{{}}}:schedule:{name}", queue.as_str())
    }

    /// SET under a queue's own name: the names of its recurring schedules.
    pub(crate) fn schedule_names(queue: &QueueName) -> String {
        format!("dq:{{{}}}:schedules", queue.as_str())
    }

    /// STRING under a queue's own name: its push target, as the server stored it (opaque
    /// here), changed with partition 0's push-delivery flag (the push target handle).
    pub(crate) fn push_target(queue: &QueueName) -> String {
        format!("dq:{{{}}}:push", queue.as_str())
    }

    /// SET, outside every queue's hash tag: the queues that have recurring schedules, for
    /// schedulers that serve them all.
    pub(crate) const SCHEDULED_QUEUES: &'static str = "dq:scheduled";

    /// SET, outside every queue's hash tag: the name of every queue used, added when its
    /// partition count is first read or recorded (by the queue core).
    pub(crate) const QUEUES: &'static str = "dq:queues";

    /// STRING, set once the queues from before [`QUEUES`](Self::QUEUES) existed have been
    /// found by one walk of the keyspace and added to it.
    pub(crate) const QUEUES_WALKED: &'static str = "dq:queues:walked";

    /// The `SCAN` pattern that matches every queue's keys.
    pub(crate) fn scan_pattern() -> &'static str {
        "dq:{*}:*"
    }

    /// The queue that `key` names by its partition count or by the sequence key of its
    /// partition 0 (a queue used before partitions existed has only that), if it is either.
    pub(crate) fn queue_of(key: &str) -> Option<QueueName> {
        let rest = key.strip_prefix("dq:{")?;
        let name = rest
            .strip_suffix("}:seq")
            .or_else(|| rest.strip_suffix("}:partitions"))?;
        // Other partitions' tags hold '#', which no queue name does.
        QueueName::new(name).ok()
    }

    /// What every key of this partition starts with: `dq:{<tag>}:`.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The `SCAN` pattern that matches every key of `queue`, in every partition (after the
    /// name, partition 0's tag closes and the others' go on with `#`).
    pub(crate) fn queue_pattern(queue: &QueueName) -> String {
        format!("dq:{{{}[}}#]*", queue.as_str())
    }

    /// The Redis Cluster slot these keys live in.
    pub(crate) fn slot(&self) -> u16 {
        self.slot
    }

    /// All keys, in the order the scripts expect them.
    pub(crate) fn all(&self) -> &[String] {
        &self.all
    }

    pub(crate) fn pending(&self) -> &str {
        &self.all[0]
    }

    pub(crate) fn seq(&self) -> &str {
        &self.all[7]
    }

    /// How long Redis keeps a minute of history (25 hours: a day's chart, and an hour to
    /// spare).
    pub(crate) const HISTORY_TTL_SECS: u64 = 90_000;

    /// HASH: the partition's counts in the minute `minute` (ms since the epoch / 60,000) of
    /// the server's clock, kept [`HISTORY_TTL_SECS`](Self::HISTORY_TTL_SECS) (`add_history`
    /// in prelude.lua; the history handle reads it).
    pub(crate) fn history(&self, minute: u64) -> String {
        format!("{}m:{minute}", self.prefix)
    }

    /// STREAM: the partition's events, one entry per change of a message's state, kept
    /// while the queue records them (events.lua); also the shard channel on which their
    /// scripts say that events were added (the event reader waits on it).
    pub(crate) fn events(&self) -> String {
        format!("{}events", self.prefix)
    }

    /// ZSET: the last ticks of recurring schedule `name` sent to this partition (send.lua),
    /// so that a backfill sends only ticks never sent.
    pub(crate) fn schedule_ticks(&self, name: &str) -> String {
        format!("{}ticks:{name}", self.prefix)
    }

    pub(crate) fn dead(&self) -> &str {
        &self.all[4]
    }

    pub(crate) fn wake(&self) -> &str {
        &self.all[8]
    }

    pub(crate) fn control(&self) -> &str {
        &self.all[9]
    }

    /// STRING, one per consumer, expiring with the lease: the token base and sequence
    /// bytes of the consumer's last claim, so that a claim whose reply was lost can be
    /// repeated (`claim.lua`).
    pub(crate) fn claim_record(&self, consumer: &str) -> String {
        format!("{}claim:{consumer}", self.prefix)
    }
}

/// The Redis Cluster slot of a hash tag.
pub(crate) fn slot(tag: &str) -> u16 {
    crc16(tag.as_bytes()) & 0x3FFF
}

/// CRC16 as Redis Cluster uses it (XMODEM).
pub(crate) fn crc16(data: &[u8]) -> u16 {
    crc16::State::<crc16::XMODEM>::calculate(data)
}
