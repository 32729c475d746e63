//! The ground floor: what goes in and comes out. Values, their validation and their
//! encoding; nothing here talks to Redis or imports from another floor.
//!
//! * A message and its options: `options.rs` (send and receive options, limits), `record.rs`
//!   (the bytes stored for one message) with `extension.rs` (the fields added since) and
//!   `send_fields.rs` (which of them a send writes, with what format and path),
//!   `buckets.rs` (which messages wait in far-future buckets), `expiry.rs` (deadlines),
//!   `upsert.rs` (replace and debounce), `trace_context.rs` (W3C trace context carried with
//!   a message), `names.rs` (queue names and ids).
//! * What a caller is handed: `delivery.rs`, `receipt.rs` (a delivery's receipt, and what
//!   every holder of a lease is), `message.rs` (what delayq tells about a message),
//!   `state.rs`, `error.rs`, `error_history.rs` (a message's last failures), `event.rs`
//!   (what an event is, where a reader stands), `retention.rs` (final records of ended
//!   messages), `reply.rs` (reading script replies).
//! * `sealing.rs`: payloads encrypted at rest (the keys, sealing and opening).
//! * Settings: `config.rs` (the client's), `settings.rs` (a queue's, kept in Redis).
//! * Schedules' rules: `recurrence.rs` with `recurrence/` (cron and intervals),
//!   `schedule_firing.rs` (a schedule's jitter and overlap).
//! * `recording.rs`: the metrics delayq records.

pub(crate) mod buckets;
pub(crate) mod config;
pub(crate) mod delivery;
pub(crate) mod error;
pub(crate) mod error_history;
pub(crate) mod event;
pub(crate) mod expiry;
pub(crate) mod extension;
pub(crate) mod message;
pub(crate) mod names;
pub(crate) mod options;
pub(crate) mod receipt;
pub(crate) mod record;
pub(crate) mod recording;
pub(crate) mod recurrence;
pub(crate) mod reply;
pub(crate) mod retention;
pub(crate) mod schedule_firing;
pub(crate) mod sealing;
pub(crate) mod send_fields;
pub(crate) mod settings;
pub(crate) mod state;
pub(crate) mod trace_context;
pub(crate) mod upsert;
