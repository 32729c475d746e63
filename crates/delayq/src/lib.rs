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
//! # Layout
//! * `client.rs`: [`DelayQ`], the connection; makes [`Queue`] handles.
//! * `queue.rs`: [`Queue`]: send, cancel, reschedule, get, stats, ack, nack, extend.
//! * `consumer.rs`: [`Consumer`]: receive, waiting for due times without polling.
//! * `queue_set.rs`: [`QueueSet`]: several queues served together, strictly or by weight.
//! * `partitions.rs`: one queue spread over several hash tags (cluster nodes), and how a
//!   message's id names its partition.
//! * `dead_letters.rs`: [`DeadLetters`]: count, list, requeue, purge.
//! * `push_target.rs`: a queue's push target (the server's), kept with its push-delivery flag.
//! * `error_history.rs`: a message's last few failures ([`FailedAttempt`]), as Redis keeps them.
//! * `worker/`: the worker runtime.
//! * `options.rs`, `message.rs`, `names.rs`, `receipt.rs`, `error.rs`: what goes in and
//!   comes out.
//! * `keys.rs` names every Redis key; `record.rs` is the stored message layout;
//!   `scripts.rs` and `scripts/*.lua` are the atomic operations; `connection.rs` holds the
//!   connection rules; `sentinel.rs` finds the master through Redis Sentinel; `wakeup.rs`
//!   carries consumers' subscriptions to wake-ups on one connection per client; `reply.rs`
//!   reads script replies; `recording.rs` names the metrics delayq records.

mod browse;
mod client;
mod connection;
mod consumer;
mod dead_letters;
mod error;
mod error_history;
mod history;
mod keys;
mod message;
mod names;
mod options;
mod partitions;
mod push_target;
mod queue;
mod queue_set;
mod receipt;
mod record;
mod recording;
mod recurrence;
mod reply;
mod scheduler;
mod schedules;
mod scripts;
mod sentinel;
mod settings;
mod wakeup;
pub mod worker;

pub use browse::{Cursor, Page, BROWSE_PAYLOAD_BYTES};
pub use client::{DelayQ, RedisConnection};
pub use consumer::{Consumer, Delivery, ReceiveOptions};
pub use dead_letters::DeadLetters;
pub use error::{Error, InvalidInput, Result};
pub use error_history::FailedAttempt;
pub use history::{Lateness, Minute, MAX_HISTORY_MINUTES};
pub use message::{
    Amend, CancelOutcome, DeadLetter, DeadLettered, MessageInfo, NackOutcome, Next, RateLimit,
    Sent, State, Stats,
};
pub use names::{QueueName, MAX_MESSAGE_ID_LEN, MAX_QUEUE_NAME_LEN};
pub use options::{
    Backoff, Config, Message, PayloadKind, Schedule, SendOptions, StepDelays, DEFAULT_MAX_ATTEMPTS,
    DEFAULT_PRIORITY, MAX_BACKOFF_STEPS, MAX_DELAY, MAX_PRIORITY, MAX_REPLICA_WAIT,
};
pub use partitions::MAX_PARTITIONS;
pub use queue::{Queue, MAX_BATCH, MAX_BATCH_BYTES};
pub use queue_set::{Order, QueueSet, MAX_QUEUES_PER_SET, MAX_QUEUE_WEIGHT};
pub use receipt::Receipt;
pub use recording::{HANDLER_BUCKETS, LATENESS_BUCKETS};
pub use recurrence::{MissedTicks, Recurrence};
pub use scheduler::Scheduler;
pub use schedules::{tick_id, ScheduleInfo, Schedules, MAX_SCHEDULE_NAME_LEN};
pub use settings::{Setting, MAX_IDEMPOTENCY_WINDOW};
