//! What each message of a run is and how its handler behaves, decided by its number alone so
//! that producers, workers and the checker agree without talking to each other.

use std::time::Duration;

use delayq::Backoff;

/// The queue every run uses.
pub const QUEUE: &str = "chaos";

/// Attempts per message: high enough that kills and lease losses (each of which uses an
/// attempt) never push a message to the dead letters, which would count as never processed.
pub const MAX_ATTEMPTS: u16 = 100;

/// Lease of every delivery. Short, so that a frozen Redis outlives it.
pub const LEASE: Duration = Duration::from_secs(2);
/// How long before its due time a library process's consumer may take a message
/// (`Config::look_ahead`): far more than the default 2 ms, so that kills, SIGTERMs and cut
/// connections find messages taken ahead and not yet handed over (none may start early).
pub const LOOK_AHEAD: Duration = Duration::from_millis(50);

/// The longest retry delay of [`backoff`].
pub const BACKOFF_CAP: Duration = Duration::from_secs(2);

/// Retry policy of every message: quick, so that retries happen within the run.
pub fn backoff() -> Backoff {
    Backoff::exponential(Duration::from_millis(100), BACKOFF_CAP).with_jitter(20)
}

/// Groups the run's grouped messages spread over.
pub const GROUPS: u64 = 20;

/// The queue's group concurrency: every group is delivered in order, one at a time.
pub const GROUP_CONCURRENCY: u32 = 1;

/// Events the queue keeps per partition: more than a run makes, so the checker reads every
/// one (`event_checks.rs`).
pub const EVENTS_KEPT: u64 = 10_000_000;

/// How far ahead (ms) claims move the buckets of messages due later (the control field
/// `bucket_horizon_ms`; 60 s unless set): short, so that most of the run's delayed messages
/// wait in buckets once the queue is of format 5, and every fault meets their moves.
pub const BUCKET_HORIZON_MS: u64 = 500;

/// One message in four (all without a caller id: on a queue of several partitions a message
/// cannot have both) is in one of [`GROUPS`] groups, once the queue's data format allows
/// groups (a producer sends it without when the queue refuses: `producer.rs`).
pub fn group(n: u64) -> Option<String> {
    (n % 4 == 1).then(|| format!("g{}", (n / 4) % GROUPS))
}

/// How long after its due time a message with a deadline may still be claimed: short, so
/// that a fault (a frozen or restarted Redis, a killed worker) makes some expire.
pub const EXPIRY_WINDOW_MS: u64 = 1500;

/// One message in six, of those sent with an absolute due time (so the producer knows its
/// due time whatever its send's retries), is sent with a deadline: that due time plus
/// [`EXPIRY_WINDOW_MS`], once the queue's data format allows deadlines (a producer sends it
/// without when the queue refuses: `producer.rs`).
pub fn expires(n: u64) -> bool {
    n % 6 == 3
}

/// Half the messages carry a caller id.
pub fn caller_id(n: u64) -> Option<String> {
    n.is_multiple_of(2).then(|| format!("m{n}"))
}

/// A third are sent with an absolute due time, the rest with a delay.
pub fn uses_deliver_at(n: u64) -> bool {
    n.is_multiple_of(3)
}

/// Messages are sent in groups of ten; every third group as one batch.
pub const GROUP: u64 = 10;

/// Whether group `g` goes as one batch.
pub fn is_batch(group: u64) -> bool {
    group.is_multiple_of(3)
}

/// One message in ten fails its first two attempts on purpose, so that retries and backoff
/// run under faults too; and every attempt fails while a retry storm lasts
/// ([`storming`]).
pub fn fails(n: u64, attempt: u32) -> bool {
    (n % 10 == 3 && attempt <= 2) || storming()
}

/// The environment variable that names the retry-storm scenario's file: while it exists,
/// every handler fails (`controller/scenarios.rs`).
pub const STORM_ENV: &str = "DELAYQ_CHAOS_STORM";

/// Whether a retry storm is on: the file [`STORM_ENV`] names exists.
pub fn storming() -> bool {
    static FILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
    FILE.get_or_init(|| std::env::var_os(STORM_ENV).map(Into::into))
        .as_ref()
        .is_some_and(|f| f.exists())
}

/// The priority-flood scenario's messages are numbered from here, with priority
/// [`FLOOD_PRIORITY`]; the run's own keep the default (5).
pub const FLOOD_FROM: u64 = 1_000_000;
pub const FLOOD_PRIORITY: u8 = 9;

/// Message `n`'s priority.
pub fn priority_of(n: u64) -> u8 {
    if n >= FLOOD_FROM {
        FLOOD_PRIORITY
    } else {
        5
    }
}

/// How long handling takes: a few ms, and for one message in 97 longer than a lease, so that
/// leases must be extended while it runs.
pub fn work_time(n: u64) -> Duration {
    if n % 97 == 5 {
        LEASE + Duration::from_millis(500)
    } else {
        Duration::from_millis(n % 20)
    }
}
