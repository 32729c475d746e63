//! The run's history. Every process appends what it did to a JSON-lines file of its own, one
//! line per event, written through at once so that a `kill -9` loses nothing it recorded.
//! The checker reads them all at the end.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// How a producer or HTTP consumer records a call that failed because a Redis Cluster
/// redirected it (`MOVED`, `ASK`) while a master failed over, and that delayq (or the server,
/// with a 500) calls final rather than retryable: it retries it anyway, so that the run goes
/// on, and the checker counts these `Settle` events.
pub const REDIRECTED: &str = "redirected mid-failover, not retryable by delayq";

/// Whether an error's text is a cluster redirect, as redis-rs shows one (`Moved: 2025
/// 127.0.0.1:7001`, `Ask: ...`).
pub fn is_redirect(text: &str) -> bool {
    text.contains("Moved: ") || text.contains("Ask: ")
}

/// Microseconds since the Unix epoch by this host's clock. Every process of a run is on the
/// same host as Redis, so their times and Redis's can be compared.
///
/// Read through rustix, which asks the kernel (its vDSO) itself, never through the C
/// library: the clock-step scenario (`controller/scenarios.rs`) steps what delayq in these
/// processes reads (libfaketime stands in for the C library's clock), and the histories
/// must keep the host's true time.
pub fn now_us() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Realtime);
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1000
}

/// One thing that happened.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum Event {
    /// A send that was acknowledged: message `n` of the run is in Redis as `id`.
    Sent {
        n: u64,
        id: String,
        /// Not due before this (µs): the producer's clock before its first try plus the delay.
        nb_us: u64,
        at_us: u64,
        via: String,
        batch: bool,
        caller_id: bool,
        duplicate: bool,
        /// When the first try of this send began (µs; 0 in histories from before it was
        /// recorded): `at_us - first_try_us` is how long the producer waited for the ack.
        #[serde(default)]
        first_try_us: u64,
        /// Its group, if it was sent with one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        group: Option<String>,
        /// Its deadline (unix ms), if it was sent with one: never claimed at or after it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        expires_ms: Option<u64>,
    },
    /// A handler started on a delivery.
    Start {
        pid: u32,
        id: String,
        n: u64,
        token: String,
        attempt: u32,
        due_ms: u64,
        nb_us: u64,
        at_us: u64,
        /// The message's sequence number (from its receipt), which names its partition:
        /// sequence modulo the partition count.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seq: Option<u64>,
        /// When the delivery's lease ended as claimed (unix ms, Redis's clock): the claim was
        /// this minus [`plan::LEASE`](crate::plan::LEASE).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        lease_deadline_ms: Option<u64>,
    },
    /// That handler stopped.
    End {
        pid: u32,
        id: String,
        token: String,
        outcome: Outcome,
        at_us: u64,
    },
    /// What became of an HTTP consumer's ack or nack, or a library worker's warning about a
    /// delivery (`id`) or about all it held (`id` absent).
    Settle {
        pid: u32,
        id: Option<String>,
        token: Option<String>,
        result: String,
        at_us: u64,
    },
    /// A send that Redis or the server refused for now and the producer tries again (the
    /// same message, the same caller id): `why` is the error's code (`redis_full`,
    /// `unavailable`, ...), as the scenarios count them.
    Refused { pid: u32, why: String, at_us: u64 },
    /// Something the controller did or saw.
    Fault {
        fault: Fault,
        pid: Option<u32>,
        at_us: u64,
    },
}

/// How a handler stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Done: the work happened.
    Ok,
    /// Failed on purpose; the message is nacked.
    Failed,
    /// Stopped before done: its lease passed or was lost, or shutdown handed it back.
    Cancelled,
}

/// What the controller did (or saw happen) to a process or a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    KillWorker,
    TermWorker,
    WorkerExited,
    KillRedis,
    RestartRedis,
    FreezeRedis,
    ThawRedis,
    KillServer,
    RestartServer,
    CutConnections,
    HalfOpen,
    /// Redis Cluster (`run --cluster`): a master killed with `-9`.
    KillMaster,
    /// A replica stopped (SIGSTOP) so that it lags behind its master, which is killed next.
    FreezeReplica,
    ThawReplica,
    /// The cluster is whole again after a master kill: its replica took over.
    Promoted,
    /// The killed master started again (it rejoins as a replica).
    RestartNode,
    /// The restarted node is a replica in sync again.
    Rejoined,
    /// A process that was not killed died on its own: always a failure.
    Crashed,
    /// The queue's data format was upgraded (`upgrade.rs`).
    UpgradeFormat,
    /// Scenarios (`controller/scenarios.rs`): the network to Redis made slow and lossy, and
    /// fast again.
    SlowNetwork,
    FastNetwork,
    /// The delayq processes' clocks stepped (not Redis's).
    StepClock,
    /// Redis's `maxmemory` set to what it used, and lifted.
    FillMemory,
    FreeMemory,
    /// The AOF's disk filled, and freed.
    FillDisk,
    FreeDisk,
    /// Redis exited by itself (at a full disk, with `appendfsync always`).
    RedisExited,
    /// A host of the run's own cut off from Redis or from everything, and joined again.
    Partition,
    Heal,
    /// Every handler made to fail (a retry storm), and recovered.
    StormOn,
    StormOff,
    /// A flood of high-priority messages began.
    Flood,
}

/// Appends events to one history file.
pub struct Recorder {
    file: Mutex<File>,
}

impl Recorder {
    /// Creates (or appends to) the file at `path`.
    pub fn create(path: &Path) -> std::io::Result<Recorder> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(Recorder {
            file: Mutex::new(file),
        })
    }

    /// Writes one event (or any other record) as one line, straight to the file (no
    /// user-space buffer to lose).
    pub fn record(&self, event: &impl serde::Serialize) {
        let mut line = match serde_json::to_vec(event) {
            Ok(line) => line,
            Err(e) => panic!("an event always serialises: {e}"),
        };
        line.push(b'\n');
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = file.write_all(&line) {
            // A history with holes would make the checker lie: stop here instead.
            eprintln!("cannot write history: {e}");
            std::process::exit(3);
        }
    }
}

/// Reads every `*.jsonl` file in `dir`. A process killed mid-write may leave its last line
/// cut short; such a line is skipped and counted.
pub fn read_all(dir: &Path) -> std::io::Result<(Vec<Event>, usize)> {
    let mut events = Vec::new();
    let mut torn = 0;
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.extension().is_none_or(|e| e != "jsonl") {
            continue;
        }
        for line in BufReader::new(File::open(&path)?).lines() {
            match serde_json::from_str(&line?) {
                Ok(event) => events.push(event),
                Err(_) => torn += 1,
            }
        }
    }
    Ok((events, torn))
}

/// The payload of message `n`: its number and the earliest time it may be delivered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct Payload {
    pub n: u64,
    pub nb: u64,
}

impl Payload {
    /// Reads a payload; `None` for bytes that are not one.
    pub fn parse(bytes: &[u8]) -> Option<Payload> {
        serde_json::from_slice(bytes).ok()
    }

    /// As JSON.
    pub fn to_json(self) -> String {
        format!(r#"{{"n":{},"nb":{}}}"#, self.n, self.nb)
    }
}
