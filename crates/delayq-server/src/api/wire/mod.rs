//! The JSON shapes the API reads and writes, and their conversion to and from the library's
//! types: durations (`"15m"` or milliseconds), times (RFC 3339 or Unix milliseconds),
//! payloads (a JSON value as JSON, bytes as base64, never one taken for the other) and send
//! options.
//!
//! * `args.rs`: durations, times, retry policies and due times in requests;
//! * `send.rs`: a send's body or query string, and its options;
//! * `payload.rs`: payloads and error histories in answers.

mod args;
mod payload;
mod send;

pub use args::*;
pub use payload::*;
pub use send::*;
