//! The `delayq` server and CLI: the HTTP API over the delayq library, for services in any
//! language, and admin commands for the people on call.
//!
//! # Layout, top floor down
//! * `cmd/` (the CLI) over `server.rs`: [`server::run`], the entry point (listener, state,
//!   shutdown).
//! * `app.rs`: the whole HTTP app, the one place that joins its two fronts and puts every
//!   request through its layers. The fronts: `ui/` (the web dashboard at `/ui`, built on
//!   the API's pieces) over `api/` (the routes: `produce.rs`, `consume.rs`, `admin.rs`, ...,
//!   and `wire/`, the JSON shapes of requests and answers).
//! * `front_door.rs`: what every request passes first (Host, origin) and every answer
//!   carries; `body_guard.rs`: what holds every request body (a deadline, the bytes in
//!   flight).
//! * `state.rs`: what handlers share; `limits.rs`, `auth.rs`: what a request may do;
//!   `streams/`: event streams shared by the SSE and the dashboard's feed.
//! * The engines under the fronts: `webhooks/` (URLs called with a queue's events, by one
//!   server at a time) over `push/` (push delivery to a queue's target); `deletion.rs` (a
//!   queue's delete with what the server keeps of it).
//! * `metrics.rs`: Prometheus text at `/metrics`; `http_metrics.rs`: each request counted and
//!   timed by route; `request_spans.rs`: a span per request, when spans are exported.
//! * On the ground: `shapes/` (a payload and an event as every answer shows them),
//!   `push_envelope.rs` (a message's own push destination, inside its payload), `error.rs`
//!   (the one error shape every route answers with), `redact.rs` (secrets in URLs shown to
//!   those who must not read them whole), `slots.rs` (counted places: connections per peer,
//!   event streams per token), `rfc3339.rs`, and `embedded.rs` (the private `redis-server`
//!   that `serve` runs when given no Redis URL).

pub mod api;
pub mod app;
pub mod audit;
pub mod auth;
pub mod body_guard;
pub mod deletion;
pub mod embedded;
pub mod error;
pub mod front_door;
pub mod http_metrics;
pub mod limits;
pub mod metrics;
pub mod metrics_scope;
pub mod push;
pub mod push_envelope;
pub mod redact;
pub mod request_layer;
pub mod request_spans;
pub mod rfc3339;
pub mod server;
pub mod shapes;
pub mod slots;
pub mod state;
pub mod streams;
pub mod ui;
pub mod webhooks;
