//! The runtimes, on top of everything: `worker/` (handlers with concurrency, heartbeats,
//! graceful shutdown) and `scheduler.rs` ([`Scheduler`](crate::Scheduler): fires recurring
//! schedules).

pub(crate) mod scheduler;
pub mod worker;
