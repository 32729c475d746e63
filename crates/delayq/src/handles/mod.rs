//! A queue's handles by concern, each built on the queue core (`queue_core.rs`: a queue's
//! name, connection, partition layout, script invocation admitted by the data format, and
//! wake-up subscriptions). [`Queue`](crate::Queue) hands them out.
//!
//! * Messages: `send.rs` (send, batches) with `send_generated.rs` (a batch without caller
//!   ids), `by_id.rs` (get, cancel, reschedule), `settle.rs` (ack, nack, fail, release,
//!   extend), `dead_letters.rs`, `groups.rs`, `browse.rs` (list, search).
//! * Reading what happened: `history.rs` (per-minute counts), `stats.rs`, `events.rs` (each
//!   message's changes of state, from a stream) with `event_lookback.rs` (the latest events,
//!   a message's timeline) over `event_entries.rs` (stream entries taken apart).
//! * Running a queue: `control.rs` (pause, resume, settings), `queue_delete.rs` (a queue
//!   deleted in batches), `push_target.rs` (the server's push target), `upgrade.rs` (a
//!   queue's data format and its upgrade), `schedules.rs` (recurring schedules) with
//!   `schedule_backfill.rs` (missed ticks sent later).
//! * Payloads encrypted at rest: `sealed.rs` (which sends seal, what readers get) and
//!   `reseal.rs` (what is stored sealed again with the newest key).

pub(crate) mod browse;
pub(crate) mod by_id;
pub(crate) mod control;
pub(crate) mod dead_letters;
pub(crate) mod event_entries;
pub(crate) mod event_lookback;
pub(crate) mod events;
pub(crate) mod groups;
pub(crate) mod history;
pub(crate) mod push_target;
pub(crate) mod queue_core;
pub(crate) mod queue_delete;
pub(crate) mod reseal;
pub(crate) mod schedule_backfill;
pub(crate) mod schedule_definition;
pub(crate) mod schedules;
pub(crate) mod sealed;
pub(crate) mod send;
pub(crate) mod send_generated;
pub(crate) mod settle;
pub(crate) mod stats;
pub(crate) mod upgrade;
