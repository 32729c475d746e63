//! delayq: a reliable delayed-message queue on Redis.
//!
//! Send a message now and have it delivered later, at least once, to one consumer at a time:
//! close an order that is still unpaid 15 minutes after it was placed, retry a webhook in
//! 30 s, 2 min, 10 min. Every state change is one atomic Lua script; the Redis server's clock
//! decides what is due.
//!
//! # System overview
//!
//! ```no_run
//! use std::time::Duration;
//! use delayq::{DelayQ, ReceiveOptions, SendOptions};
//!
//! # async fn demo() -> delayq::Result<()> {
//! let dq = DelayQ::connect("redis://127.0.0.1/").await?;
//! let orders = dq.queue("orders")?;
//! orders
//!     .send(b"close 1234", &SendOptions::new().delay(Duration::from_secs(900)).id("close-1234"))
//!     .await?;
//!
//! // A paid order cancels its pending message by id.
//! orders.cancel("close-1234").await?;
//!
//! // Consumers claim what is due under a lease and settle it.
//! let mut consumer = orders.consumer().await?;
//! for delivery in consumer.receive(&ReceiveOptions::default()).await? {
//!     orders.ack(&delivery).await?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! For long-running processing use the [`worker`] runtime: concurrency, lease heartbeats,
//! retries, graceful shutdown.
//!
//! # Guarantees and their limits
//! * At least once: a handler may see a message again (after a crash or an expired lease),
//!   never two holders at once while a lease is valid. The [`worker`] never starts a
//!   delivery whose lease has passed and cancels a handler whose lease is lost; with
//!   [`Consumer`] directly, check [`Delivery::lease_remaining`].
//! * Nothing is lost on a consumer crash. Surviving a Redis restart needs AOF
//!   (`appendonly yes`, `appendfsync always` for every acknowledged send); Redis must not
//!   evict keys (`maxmemory-policy noeviction`). At `maxmemory`, sends fail (Redis `OOM`)
//!   and everything that drains, frees or reads goes on working.
//! * [`Consumer::receive`] is cancel-safe: a claim whose reply was lost is handed back by
//!   the next `receive`. Failures worth retrying say so: [`Error::is_retryable`].
//!
//! # Layout, top floor down
//! Each folder is a floor; a file imports only from its own floor's files below it and
//! from the floors below (docs/layout.md).
//! * `runtime/`: the worker runtime ([`worker`]) and the [`Scheduler`].
//! * The face: `client.rs` ([`DelayQ`]: connects, makes queue handles, lists queues), the
//!   facades `queue.rs` ([`Queue`]: hands out everything a queue offers, by concern) and
//!   `queue_set.rs` ([`QueueSet`]: several queues before one consumer).
//! * `consume/`: the consumer side ([`Consumer`], its lanes, when each claims, one claim).
//! * `handles/`: a queue's handles by concern over the queue core (send, by id, settle,
//!   dead letters, groups, browse, events, history, control, schedules, upgrade).
//! * `store/`: Redis below the core (connections, keys, partitions, the Lua scripts,
//!   formats, wake-ups); `telemetry/` (OpenTelemetry spans and their OTLP export, feature
//!   `otlp`) beside it.
//! * `values/`: what goes in and comes out (options, the stored record, deliveries,
//!   errors, settings, events, recurrences), on the ground.

mod client;
mod consume;
mod handles;
mod queue;
mod queue_set;
mod runtime;
mod store;
pub mod telemetry;
#[cfg(test)]
mod tests;
mod values;

pub use runtime::worker;

pub use client::{DelayQ, RedisConnection};
pub use consume::choice::Order;
pub use consume::consumer::Consumer;
pub use handles::browse::{Cursor, Page, BROWSE_PAYLOAD_BYTES};
pub use handles::dead_letters::DeadLetters;
pub use handles::event_lookback::{Timeline, TIMELINE_SCAN};
pub use handles::events::{EventReader, MAX_EVENTS_READ};
pub use handles::groups::{
    GroupInfo, GroupPage, GroupSettings, GroupSummary, Groups, MAX_GROUP_OFFSET, MAX_GROUP_WEIGHT,
};
pub use handles::history::{Lateness, Minute, MAX_HISTORY_MINUTES};
pub use handles::queue_delete::Deleted;
pub use handles::reseal::{Resealed, RESEAL_BATCH};
pub use handles::schedule_backfill::{Backfilled, MAX_BACKFILL_TICKS};
pub use handles::schedule_definition::{ScheduleInfo, MAX_SCHEDULE_NAME_LEN};
pub use handles::schedules::{tick_id, Schedules};
pub use handles::send::MAX_BATCH_BYTES;
pub use handles::upgrade::QueueFormat;
pub use queue::Queue;
pub use queue_set::{QueueSet, MAX_QUEUES_PER_SET, MAX_QUEUE_WEIGHT};
pub use runtime::scheduler::Scheduler;
pub use store::announcements::{Process, LEASE as ANNOUNCEMENT_LEASE};
pub use store::formats::{CLAIM_LEASE_FORMAT, DATA_FORMAT, FIRST_FORMAT};
pub use store::partitions::MAX_PARTITIONS;
pub use store::server::{ServerInfo, ServerKind, Version, MINIMUM_REDIS};
pub use values::config::{Config, MAX_CLAIM_SPACING, MAX_LOOK_AHEAD};
pub use values::delivery::Delivery;
pub use values::error::{Error, InvalidInput, Result};
pub use values::error_history::FailedAttempt;
pub use values::event::{Event, EventCursor, EventFilter, EventKind, EventStart};
pub use values::expiry::MAX_TTL;
pub use values::extension::{ENCRYPTION_FORMAT, EXPIRY_FORMAT, EXTENSION_FORMAT, GROUPS_FORMAT};
pub use values::message::{
    Amend, CancelOutcome, DeadLetter, DeadLettered, MessageInfo, NackOutcome, Next, RateLimit,
    Sealed, Sent, Stats,
};
pub use values::names::{QueueName, MAX_MESSAGE_ID_LEN, MAX_QUEUE_NAME_LEN};
pub use values::options::{
    Backoff, Message, PayloadKind, ReceiveOptions, Schedule, SendOptions, StepDelays,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, MAX_BACKOFF_STEPS, MAX_BATCH, MAX_DELAY, MAX_PRIORITY,
    MAX_REPLICA_WAIT,
};
pub use values::receipt::Receipt;
pub use values::recording::{
    describe_metrics, HANDLER_BUCKETS, LATENESS_BUCKETS, MAX_QUEUES_WITH_SERIES,
};
pub use values::recurrence::{MissedTicks, Recurrence};
pub use values::retention::{Completion, Outcome, Retention, MAX_RETAINED, MAX_RETENTION};
pub use values::schedule_firing::{tick_jitter, Firing, Overlap, MAX_JITTER};
pub use values::sealing::{key_id_of, Keyring, Undecryptable, MAX_KEY_ID_LEN, SEAL_OVERHEAD};
pub use values::settings::{
    OnExpire, Setting, DEFAULT_EVENTS_KEPT, MAX_EVENTS_KEPT, MAX_GROUP_CONCURRENCY,
    MAX_IDEMPOTENCY_WINDOW,
};
pub use values::state::State;
pub use values::trace_context::TRACEPARENT_LEN;
pub use values::upsert::{IfInFlight, OnDuplicate};
