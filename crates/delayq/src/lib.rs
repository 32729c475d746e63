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
//! Each file imports only from the floors below it.
//! * Runtimes: `worker/` (handlers with concurrency, heartbeats, graceful shutdown) and
//!   `scheduler.rs` ([`Scheduler`]: fires recurring schedules).
//! * The client: `client.rs` ([`DelayQ`]: connects, makes queue handles, lists queues).
//! * The facades: `queue.rs` ([`Queue`]) hands out everything below, by concern;
//!   `queue_set.rs` ([`QueueSet`]) puts several queues before one consumer.
//! * Handles by concern, each built on the core: `send.rs` (send, batches), `by_id.rs`
//!   (get, cancel, reschedule), `settle.rs` (ack, nack, fail, release, extend),
//!   `consumer.rs` ([`Consumer`]: receive, waiting without polling) with `lane.rs` (one
//!   partition of it: what it knows, when it may claim), `claim.rs` (one claim) and
//!   `choice.rs` (which lane next), `dead_letters.rs` ([`DeadLetters`]), `groups.rs` ([`Groups`]),
//!   `browse.rs` (list, search), `history.rs` (per-minute counts), `events.rs` (each
//!   message's changes of state, read from a stream) with `event_lookback.rs` (the latest
//!   events, a message's timeline) over `event_entries.rs` (stream entries taken apart), `stats.rs`,
//!   `control.rs` (pause, resume, settings), `queue_delete.rs` (a queue deleted in batches),
//!   `schedules.rs` ([`Schedules`]),
//!   `push_target.rs` (the server's push target), `upgrade.rs` (a queue's data format
//!   and its upgrade).
//! * The queue core: `queue_core.rs`: a queue's name, connection, partition layout, script
//!   invocation (each call admitted by the partition's data format) and wake-up
//!   subscriptions.
//! * Below the core: `formats.rs` (the data formats this delayq reads, the gate every call
//!   passes, the stamp of an upgrade) over `announcements.rs` (every process announces the
//!   newest format it reads); `wakeup.rs` (consumers' subscriptions, one push connection per
//!   client); `target.rs` (where Redis is) over `connection.rs` (the connection rules),
//!   `key_scan.rs` (a `SCAN` of every master) and
//!   `sentinel.rs` (finding the master); `partitions.rs` (one queue over several hash
//!   tags) over `keys.rs` (every Redis key and its slot); `queue_registry.rs` (the list of
//!   queue names); `scripts.rs` and `scripts/*.lua`
//!   (the atomic operations).
//! * What goes in and comes out: `options.rs`, `config.rs` (the client's settings), `settings.rs`, `message.rs`, `delivery.rs`,
//!   `receipt.rs`, `state.rs`, `names.rs`, `recurrence/`, `error.rs`, `error_history.rs` (a message's
//!   last failures), `record.rs` (the stored message layout) with `extension.rs` (the fields added since), `buckets.rs` (which messages wait in buckets), `reply.rs` (reading script
//!   replies), `recording.rs` (the metrics delayq records), `expiry.rs` (deadlines),
//!   `upsert.rs` (replace and debounce), `event.rs` (what an event is, where a reader
//!   stands), `trace_context.rs` (W3C trace context carried with a message), `telemetry/` (OpenTelemetry
//!   spans and their OTLP export, feature `otlp`), `retention.rs` (final records of ended
//!   messages), `schedule_firing.rs` (a schedule's jitter and overlap); `schedule_backfill.rs` (missed
//!   ticks sent later) extends `schedules.rs`.

mod ack_carry;
mod announcements;
mod browse;
mod buckets;
mod by_id;
mod choice;
mod claim;
mod claim_news;
mod claim_timing;
mod client;
mod config;
mod connection;
mod consumer;
mod control;
mod dead_letters;
mod delivery;
mod error;
mod error_history;
mod event;
mod event_entries;
mod event_lookback;
mod events;
mod expiry;
mod extension;
mod formats;
mod groups;
mod history;
mod key_scan;
mod keys;
mod lane;
mod message;
mod names;
mod options;
mod partitions;
mod push_target;
mod queue;
mod queue_core;
mod queue_delete;
mod queue_registry;
mod queue_set;
mod receipt;
mod receipt_acks;
mod record;
mod recording;
mod recurrence;
mod reply;
mod retention;
mod schedule_backfill;
mod schedule_firing;
mod scheduler;
mod schedules;
mod script_call;
mod scripts;
mod send;
mod send_generated;
mod sentinel;
mod server;
mod settings;
mod settle;
mod state;
mod stats;
mod target;
pub mod telemetry;
mod trace_context;
mod upgrade;
mod upsert;
mod wakeup;
pub mod worker;

pub use announcements::{Process, LEASE as ANNOUNCEMENT_LEASE};
pub use browse::{Cursor, Page, BROWSE_PAYLOAD_BYTES};
pub use choice::Order;
pub use client::{DelayQ, RedisConnection};
pub use config::{Config, MAX_CLAIM_SPACING};
pub use consumer::Consumer;
pub use dead_letters::DeadLetters;
pub use delivery::Delivery;
pub use error::{Error, InvalidInput, Result};
pub use error_history::FailedAttempt;
pub use event::{Event, EventCursor, EventFilter, EventKind, EventStart};
pub use event_lookback::{Timeline, TIMELINE_SCAN};
pub use events::{EventReader, DEFAULT_EVENTS_KEPT, MAX_EVENTS_KEPT, MAX_EVENTS_READ};
pub use expiry::MAX_TTL;
pub use extension::{EXPIRY_FORMAT, EXTENSION_FORMAT, GROUPS_FORMAT};
pub use formats::{DATA_FORMAT, FIRST_FORMAT};
pub use groups::{
    GroupInfo, GroupPage, GroupSettings, GroupSummary, Groups, MAX_GROUP_OFFSET, MAX_GROUP_WEIGHT,
};
pub use history::{Lateness, Minute, MAX_HISTORY_MINUTES};
pub use message::{
    Amend, CancelOutcome, DeadLetter, DeadLettered, MessageInfo, NackOutcome, Next, RateLimit,
    Sent, Stats,
};
pub use names::{QueueName, MAX_MESSAGE_ID_LEN, MAX_QUEUE_NAME_LEN};
pub use options::{
    Backoff, Message, PayloadKind, ReceiveOptions, Schedule, SendOptions, StepDelays,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_PRIORITY, MAX_BACKOFF_STEPS, MAX_BATCH, MAX_DELAY, MAX_PRIORITY,
    MAX_REPLICA_WAIT,
};
pub use partitions::MAX_PARTITIONS;
pub use queue::Queue;
pub use queue_delete::Deleted;
pub use queue_set::{QueueSet, MAX_QUEUES_PER_SET, MAX_QUEUE_WEIGHT};
pub use receipt::Receipt;
pub use recording::{describe_metrics, HANDLER_BUCKETS, LATENESS_BUCKETS, MAX_QUEUES_WITH_SERIES};
pub use recurrence::{MissedTicks, Recurrence};
pub use retention::{Completion, Outcome, Retention, MAX_RETAINED, MAX_RETENTION};
pub use schedule_backfill::{Backfilled, MAX_BACKFILL_TICKS};
pub use schedule_firing::{tick_jitter, Firing, Overlap, MAX_JITTER};
pub use scheduler::Scheduler;
pub use schedules::{tick_id, ScheduleInfo, Schedules, MAX_SCHEDULE_NAME_LEN};
pub use send::MAX_BATCH_BYTES;
pub use server::{ServerInfo, ServerKind, Version, MINIMUM_REDIS};
pub use settings::{OnExpire, Setting, MAX_GROUP_CONCURRENCY, MAX_IDEMPOTENCY_WINDOW};
pub use state::State;
pub use trace_context::TRACEPARENT_LEN;
pub use upgrade::QueueFormat;
pub use upsert::{IfInFlight, OnDuplicate};
