//! What a run hands the checker beside the recorded history: what was left of the queue in
//! Redis, the failovers done to a cluster and when each step happened, and how long a freeze
//! of Redis lasts. The controller and the failover thread gather it; the checker judges it.

use std::time::Duration;

/// How long Redis stays frozen.
pub const FREEZE: Duration = Duration::from_secs(3);

/// What was left of the queue in Redis after the run (entries per key).
#[derive(Debug, Default, Clone)]
pub struct Leftovers {
    /// Pending without a group.
    pub pending: u64,
    /// Groups that still have messages (pending or in flight: `gsize`).
    pub groups: u64,
    pub in_flight: u64,
    pub dead: u64,
    pub index: u64,
    pub held: u64,
    pub dead_records: u64,
    pub errors: u64,
    /// The dead letters (read through the library after the run).
    pub dead_letters: Vec<DeadOne>,
    /// Every event the queue recorded (read through the library after the run).
    pub events: Vec<Recorded>,
}

/// A dead letter left after the run.
#[derive(Debug, Clone)]
pub struct DeadOne {
    pub id: String,
    /// When it died (unix ms, Redis's clock).
    pub died_ms: u64,
    /// Its payload's message number and not-before time (µs), if it is a payload of the run.
    pub payload: Option<crate::history::Payload>,
    pub last_error: Option<String>,
}

/// One event of the run, as the checker needs it: its kind, its message's id, and whether
/// the message was dropped rather than dead-lettered (an expiry's detail).
#[derive(Debug, Clone)]
pub struct Recorded {
    pub kind: String,
    pub id: String,
    pub dropped: bool,
}

/// One count of [`Leftovers::counted`] on `redis`: `cmd` on `key`, where the command
/// `BUCKETED` reads the control hash's field `bucketed` (none: 0). `None` when it could not
/// be read.
pub fn count_of(redis: &redis_fixture::RedisServer, cmd: &str, key: &str) -> Option<u64> {
    use redis_fixture::Reply;
    let reply = if cmd == "BUCKETED" {
        redis.command(&["HGET", key, "bucketed"])
    } else {
        redis.command(&[cmd, key])
    };
    match reply {
        Ok(Reply::Int(n)) => Some(n.max(0) as u64),
        Ok(Reply::Bulk(None)) => Some(0),
        Ok(Reply::Bulk(Some(text))) => std::str::from_utf8(&text)
            .ok()?
            .parse::<i64>()
            .ok()
            .map(|n| n.max(0) as u64),
        _ => None,
    }
}

impl Leftovers {
    /// Counts each of the queue's keys with `count(command, key name)` (`ZCARD`, `HLEN`, or
    /// `BUCKETED`: the control field that counts the messages in buckets; `u64::MAX` when it
    /// could not be read).
    pub fn counted(count: impl Fn(&str, &str) -> u64) -> Leftovers {
        Leftovers {
            pending: count("ZCARD", "pending").saturating_add(count("BUCKETED", "control")),
            groups: count("ZCARD", "gsize"),
            in_flight: count("ZCARD", "leases"),
            dead: count("ZCARD", "dead"),
            index: count("HLEN", "index"),
            held: count("HLEN", "held"),
            dead_records: count("HLEN", "dead:msgs"),
            errors: count("HLEN", "errors"),
            dead_letters: Vec::new(),
            events: Vec::new(),
        }
    }
}

/// One master kill, with when each step happened (µs, this host's clock).
#[derive(Debug, Clone)]
pub struct MasterKill {
    /// The node killed (index into the cluster's nodes).
    pub node: usize,
    /// The queue's partitions it held.
    pub partitions: Vec<u16>,
    /// When its replica was cut off (frozen, its link dropped), if it was.
    pub stalled_from_us: Option<u64>,
    pub killed_us: u64,
    /// When the cluster was whole again, the replica a master.
    pub promoted_us: u64,
    /// When the restarted node was a replica in sync again.
    pub rejoined_us: u64,
}

/// What the checker needs to know about a cluster run.
#[derive(Debug, Clone)]
pub struct ClusterRun {
    /// The queue's partition count.
    pub partitions: u16,
    /// Whether sends waited for a replica.
    pub wait: bool,
    pub kills: Vec<MasterKill>,
}
