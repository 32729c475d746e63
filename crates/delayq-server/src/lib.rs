//! The `delayq` server and CLI: the HTTP API over the delayq library, for services in any
//! language, and admin commands for the people on call.
//!
//! # Layout
//! * `server.rs`: [`server::run`], the entry point (listener, state, shutdown).
//! * `state.rs`: what handlers share; `limits.rs`, `auth.rs`: what a request may do;
//!   `front_door.rs`: what every request passes first (Host, origin) and every answer carries;
//!   `body_guard.rs`: what holds every request body (a deadline, the bytes in flight).
//! * `api/`: the routes (`produce.rs`, `consume.rs`, `admin.rs`) and `wire/`, the JSON
//!   shapes; `error.rs`: the one error shape every route answers with.
//! * `metrics.rs`: Prometheus text at `/metrics`; `http_metrics.rs`: each request counted and
//!   timed by route; `request_spans.rs`: a span per request,
//!   when spans are exported.
//! * `deletion.rs`: a queue's delete with what the server keeps of it (the API and the CLI).
//! * `ui/`: the web dashboard at `/ui`.
//! * `embedded.rs`: the private `redis-server` that `serve` runs when given no Redis URL.
//! * `webhooks/`: URLs called with a queue's events, by one server at a time.
//! * `redact.rs`: how secrets in URLs are shown to those who must not read them whole;
//!   `slots.rs`: counted places (connections per peer, event streams per token).

pub mod api;
pub mod auth;
pub mod body_guard;
pub mod deletion;
pub mod embedded;
pub mod error;
pub mod front_door;
pub mod http_metrics;
pub mod limits;
pub mod metrics;
pub mod push;
pub mod redact;
pub mod request_spans;
pub mod rfc3339;
pub mod server;
pub mod slots;
pub mod state;
pub mod ui;
pub mod webhooks;
