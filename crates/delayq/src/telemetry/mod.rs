//! OpenTelemetry tracing across the queue (feature `otlp`): spans for send, receive (the
//! claim), process (the handler), ack and nack, joined to each message's trace through the
//! `traceparent` stored with it (`trace_context.rs`), and their export over OTLP.
//!
//! Off until turned on: [`Telemetry::otlp`] (or [`Telemetry::from_env`]) builds the exporter
//! and turns delayq's spans on; an application with its own OpenTelemetry pipeline (a global
//! tracer provider and a `tracing-opentelemetry` layer) calls [`enable`] instead. Until
//! then no span is made, and without the feature none of this is compiled: each span
//! helper in `spans.rs` is then a no-op.
//!
//! The trace a message makes: `send` is a child of the caller's current span (or of the
//! `traceparent` given at send, when the caller's span is not in that trace); a message
//! sent without a `traceparent` carries the `send` span's context; `process` (the worker's
//! handler, a `tracing` span, so the handler's own spans nest in it) and a single `ack` or
//! `nack` are children of the message's `traceparent`; `receive` links to the messages it
//! claimed. See the README's "Tracing" section.

#[cfg(feature = "otlp")]
pub(crate) mod spans;
#[cfg(not(feature = "otlp"))]
#[path = "spans_off.rs"]
pub(crate) mod spans;

#[cfg(feature = "otlp")]
mod export;
#[cfg(feature = "otlp")]
mod http_client;
#[cfg(feature = "otlp")]
mod traceparent;

#[cfg(feature = "otlp")]
pub use export::{Telemetry, TelemetryError};
#[cfg(feature = "otlp")]
pub use spans::{enable, is_enabled, join_trace, traceparent_of};
#[cfg(feature = "otlp")]
pub use traceparent::{format_traceparent, parse_traceparent};
