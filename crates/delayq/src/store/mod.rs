//! Redis below the queue core: where Redis is, how delayq talks to it, and what it keeps
//! there. Imports only the values below it.
//!
//! * Where and how: `target.rs` (where Redis is) over `connection.rs` (the connection
//!   rules), `sentinel.rs` (finding the master), `key_scan.rs` (a `SCAN` of every master),
//!   `server.rs` (which server it is).
//! * What is kept: `keys.rs` (every Redis key and its slot), `partitions.rs` (one queue over
//!   several hash tags), `queue_registry.rs` (the list of queue names).
//! * The atomic operations: `scripts.rs` and `scripts/*.lua` (one file a script), called by
//!   `script_call.rs` (`FCALL`, or `EVALSHA` where Functions are refused).
//! * Formats: `formats.rs` (the data formats this delayq reads, the gate every call passes)
//!   over `announcements.rs` (every process announces the newest format it reads).
//! * `wakeup.rs`: consumers' subscriptions to wake channels, one push connection per
//!   client.

pub(crate) mod announcements;
pub(crate) mod connection;
pub(crate) mod formats;
pub(crate) mod key_scan;
pub(crate) mod keys;
pub(crate) mod partitions;
pub(crate) mod queue_registry;
pub(crate) mod script_call;
pub(crate) mod scripts;
pub(crate) mod sentinel;
pub(crate) mod server;
pub(crate) mod target;
pub(crate) mod wakeup;
