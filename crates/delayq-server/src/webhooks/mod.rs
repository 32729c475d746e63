//! State webhooks: URLs subscribed to a queue's events (`PUT /v1/queues/{q}/webhooks`), each
//! called with every event of the kinds it asked for, signed as pushes are, at least once.
//!
//! * `config.rs`: a queue's webhooks and each one's place in the event stream, in Redis;
//! * `request.rs`: one event's request to one URL (address checked, signed, bounded);
//! * `runtime.rs`: which server calls a queue's webhooks (one at a time, by a lease), and
//!   the dispatchers that follow each webhook's events, retry with backoff and move its
//!   place on.
//!
//! Webhooks read the event stream (`delayq::EventReader`) the scripts write; nothing on the
//! queue's own path waits for them, so a slow or dead endpoint never slows the queue: its
//! webhook falls behind, and catches up when the endpoint is back (while the events it
//! needs are still kept).

pub mod config;
mod request;
pub mod runtime;
