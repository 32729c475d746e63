//! The one place that names Redis keys.
//!
//! Every key of a queue carries the queue name as a Redis Cluster hash tag
//! (`dq:{orders}:pending`), so all of a queue's keys live in one slot and every script can
//! touch them atomically, on a single node or in a cluster.

use crate::QueueName;

/// The keys of one queue. Scripts receive [`Keys::all`] as their KEYS, in this order.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    all: [String; 9],
    prefix: String,
}

impl Keys {
    pub(crate) fn new(queue: &QueueName) -> Self {
        let prefix = format!("dq:{{{}}}:", queue.as_str());
        let key = |name: &str| format!("{prefix}{name}");
        Keys {
            all: [
                // ZSET, all scores 0: pending messages (delayed and ready), each member a whole
                // record whose first 13 bytes sort it by (due µs, seq).
                key("pending"),
                // HASH id -> sort key, for pending and in-flight messages whose id does not
                // encode it (caller ids, moved messages).
                key("index"),
                // ZSET (seq bytes + lease token) -> lease deadline ms: messages in flight.
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
            ],
            prefix,
        }
    }

    /// The `SCAN` pattern that matches every queue's sequence key.
    pub(crate) fn seq_pattern() -> &'static str {
        "dq:{*}:seq"
    }

    /// The queue whose sequence key is `key`, if it is one.
    pub(crate) fn queue_of_seq(key: &str) -> Option<QueueName> {
        let name = key.strip_prefix("dq:{")?.strip_suffix("}:seq")?;
        QueueName::new(name).ok()
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

    pub(crate) fn dead(&self) -> &str {
        &self.all[4]
    }

    pub(crate) fn wake(&self) -> &str {
        &self.all[8]
    }

    /// STRING, one per consumer, expiring with the lease: the token base and sequence
    /// bytes of the consumer's last claim, so that a claim whose reply was lost can be
    /// repeated (`claim.lua`).
    pub(crate) fn claim_record(&self, consumer: &str) -> String {
        format!("{}claim:{consumer}", self.prefix)
    }
}
