//! Push delivery: the server calls a queue's HTTP endpoint with each message when it is due,
//! signs the request, and retries by the message's backoff until the endpoint takes it.
//!
//! * `target.rs`: the push target of a queue, stored in Redis;
//! * `address.rs`: which addresses pushes may reach (SSRF protection);
//! * `clients.rs`: the HTTP clients pushes and callbacks go through, with those checks;
//! * `signature.rs`: the `Delayq-Signature` header, and its verification;
//! * `headers.rs`: which extra request headers a target or a message may set;
//! * `deliver.rs`: one request and what its outcome means;
//! * `callbacks.rs`: failure callbacks, bounded, from whichever server found a death;
//! * `runtime.rs`: the workers that make the requests, one per target, in every server.

pub mod address;
pub mod callbacks;
pub mod clients;
mod deliver;
pub mod headers;
pub mod runtime;
pub mod signature;
pub mod target;
