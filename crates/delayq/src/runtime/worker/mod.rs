//! The worker runtime: receives messages and runs an async handler on each, with bounded
//! concurrency, lease heartbeats and graceful shutdown.
//!
//! * Handler `Ok` acks the message; `Err` nacks it with the error's text (retried by its
//!   backoff policy, dead-lettered after the last attempt); a [`Failure`] error can ask for
//!   a retry after a given time or a dead letter now instead. A panic is a failed attempt
//!   too, never a dead worker; so is a handler past its `handler_timeout`.
//! * While handlers run, their leases are extended every third of the lease, so a slow
//!   handler is never doubled up with another consumer.
//! * A handler runs only while its lease surely holds. A delivery whose lease has passed by
//!   the time its claim reply arrives (judged from when the claim was sent) is never
//!   started: Redis hands it out again. A running handler whose lease is lost (an extend
//!   finds it taken, or it passes without being renewed, as when Redis is unreachable) is
//!   cancelled, its future dropped, and its message left to Redis.
//! * Each handler's outcome is decided once: by the handler finishing (ack or nack), by
//!   shutdown handing it back, or by its lease being lost, whichever comes first.
//! * On shutdown the worker stops claiming, waits for running handlers up to the grace period,
//!   then cancels the rest and hands their messages back as ready at once.
//! * When Redis goes away the worker logs, backs off, and carries on once it is back.
//!
//! * Successes are acked in batches: one script call settles every handler that finished
//!   while the previous call was under way.
//!
//! Layout: `builder.rs` (settings), `runner.rs` (the loop), `settle.rs` (batched ack/nack with
//! retries, and the registry of running handlers), `failure.rs` (errors that say what comes
//! next), `catch_unwind.rs` (panics as values).

mod builder;
mod catch_unwind;
mod failure;
mod runner;
mod settle;

pub use builder::{Worker, WorkerBuilder, MAX_ACK_LINGER, MAX_CONCURRENCY};
pub use failure::{FailedDelivery, Failure, Verdict};
pub use runner::StopReason;
