//! The spans delayq makes, once turned on ([`enable`]): OpenTelemetry spans for send,
//! receive, ack and nack (leaves, made with the OpenTelemetry API, so that `receive` can
//! carry its own start time), and a `tracing` span for process (the handler runs in it, so
//! its own `tracing` spans nest under it through `tracing-opentelemetry`). Names and
//! attributes follow OpenTelemetry's messaging conventions: `{operation} {queue}`,
//! `messaging.system = delayq`.

use std::fmt::Display;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use opentelemetry::context::{FutureExt, WithContext};
use opentelemetry::global::{self, BoxedSpan};
use opentelemetry::trace::{
    Link, Span as _, SpanContext, SpanKind, Status, TraceContextExt, Tracer,
};
use opentelemetry::{Context, KeyValue};
use tracing::instrument::Instrumented;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use super::traceparent::{format_traceparent, parse_traceparent};
use crate::values::delivery::Delivery;

static ON: AtomicBool = AtomicBool::new(false);

/// Most links one span carries: a batch of 1,000 messages links to its first 128.
const MAX_LINKS: usize = 128;

/// Turns delayq's spans on, for an application that set up OpenTelemetry itself: they go
/// to the global tracer provider (`opentelemetry::global::set_tracer_provider`), and
/// `process` spans through the application's `tracing-opentelemetry` layer.
/// [`Telemetry::otlp`](super::Telemetry::otlp) calls it.
pub fn enable() {
    ON.store(true, Ordering::Relaxed);
}

/// Whether spans are made.
pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// A send, ack, nack or release span: started when made, ended by [`end`](Self::end) (or
/// when dropped, when the operation did not finish).
pub(crate) struct OpSpan(Option<BoxedSpan>);

impl OpSpan {
    /// A `send` of `count` messages to `queue`: a child of the caller's current span, or of
    /// the `traceparent` given with the message when the caller's span is in another trace.
    pub(crate) fn send(queue: &str, count: usize, given: Option<&str>) -> OpSpan {
        if !on() {
            return OpSpan(None);
        }
        let current = current_context();
        let parent = match given.and_then(parse_traceparent) {
            Some(given) if !same_trace(&current, &given) => {
                Context::new().with_remote_span_context(given)
            }
            _ => current,
        };
        let mut attributes = common(queue, "send", "send");
        if count != 1 {
            attributes.push(KeyValue::new("messaging.batch.message_count", count as i64));
        }
        OpSpan(Some(start(
            format!("send {queue}"),
            SpanKind::Producer,
            attributes,
            &parent,
            Vec::new(),
        )))
    }

    /// Settling (`ack`, `nack`, `release`) messages held: a child of the caller's current
    /// span, else of the one message's `traceparent`; a batch links to its messages'.
    pub(crate) fn settle<'a>(
        operation: &'static str,
        queue: &str,
        traceparents: impl Iterator<Item = Option<&'a str>>,
    ) -> OpSpan {
        if !on() {
            return OpSpan(None);
        }
        let traceparents: Vec<Option<&str>> = traceparents.collect();
        let current = current_context();
        let (parent, links) = match traceparents[..] {
            // One message: its trace, sampled or not (the sampler follows the parent).
            [Some(one)] if !current.span().span_context().is_valid() => {
                let parent = parse_traceparent(one)
                    .map_or_else(Context::new, |c| Context::new().with_remote_span_context(c));
                (parent, Vec::new())
            }
            _ => {
                let sampled = traceparents.iter().flatten().filter_map(|t| sampled(t));
                (current, links_to(sampled.take(MAX_LINKS).collect()))
            }
        };
        let count = traceparents.len() as i64;
        let mut attributes = common(queue, "settle", operation);
        attributes.push(KeyValue::new("messaging.batch.message_count", count));
        OpSpan(Some(start(
            format!("{operation} {queue}"),
            SpanKind::Client,
            attributes,
            &parent,
            links,
        )))
    }

    /// This span's context as a `traceparent`, to store with a message sent without one.
    /// A span not sampled is carried too (its flags say so), as W3C Trace Context asks: the
    /// handler then skips its own span at next to no cost (`in_process_span`), where a
    /// message without trace context would start a trace of its own for the sampler.
    pub(crate) fn traceparent(&self) -> Option<String> {
        self.0
            .as_ref()
            .and_then(|span| format_traceparent(span.span_context()))
    }

    /// Names the message sent (its id is known once the send returns).
    pub(crate) fn message_id(&mut self, id: &str) {
        if let Some(span) = &mut self.0 {
            span.set_attribute(KeyValue::new("messaging.message.id", id.to_owned()));
        }
    }

    /// Ends the span, marked failed with the error if the operation failed.
    pub(crate) fn end<T, E: Display>(mut self, result: &Result<T, E>) {
        if let Some(mut span) = self.0.take() {
            if let Err(e) = result {
                span.set_status(Status::error(e.to_string()));
            }
            span.end();
        }
    }
}

/// Records a `receive` from `queue` that claimed `claimed`, started at `started`: a child of
/// the caller's current span, linked to each message's trace. Made only for a claim that
/// took something, so an idle consumer's empty claims leave no spans.
pub(crate) fn record_receive(queue: &str, started: SystemTime, claimed: &[Delivery]) {
    if !on() {
        return;
    }
    let contexts = claimed
        .iter()
        .filter_map(|d| d.traceparent.as_deref().and_then(sampled))
        .take(MAX_LINKS)
        .collect();
    let mut attributes = common(queue, "receive", "receive");
    attributes.push(KeyValue::new(
        "messaging.batch.message_count",
        claimed.len() as i64,
    ));
    let tracer = global::tracer("delayq");
    let mut span = tracer
        .span_builder(format!("receive {queue}"))
        .with_kind(SpanKind::Client)
        .with_start_time(started)
        .with_attributes(attributes)
        .with_links(links_to(contexts))
        .start_with_context(&tracer, &current_context());
    span.end();
}

/// Where a handler runs: in its `process` span, a child of the message's `traceparent` (a
/// root without one). Of a message whose trace is not sampled, no span is made (one per
/// message would cost the most of all): the handler runs in that trace's context, so its
/// own spans are not sampled either.
pub(crate) struct ProcessTrace {
    span: tracing::Span,
    context: Context,
}

impl ProcessTrace {
    /// The trace of handling `delivery`.
    pub(crate) fn of(delivery: &Delivery) -> ProcessTrace {
        let without_span = |context| ProcessTrace {
            span: tracing::Span::none(),
            context,
        };
        if !on() {
            return without_span(Context::new());
        }
        match delivery.traceparent.as_deref().and_then(parse_traceparent) {
            Some(unsampled) if !unsampled.is_sampled() => {
                without_span(Context::new().with_remote_span_context(unsampled))
            }
            parent => ProcessTrace {
                span: process_span(delivery, parent),
                context: Context::new(),
            },
        }
    }

    /// Runs `work` (the handler) in it.
    pub(crate) fn run<F: Future>(self, work: F) -> WithContext<Instrumented<F>> {
        work.instrument(self.span).with_context(self.context)
    }
}

fn process_span(delivery: &Delivery, parent: Option<SpanContext>) -> tracing::Span {
    let span = tracing::info_span!(
        "process",
        otel.name = %format_args!("process {}", delivery.queue),
        otel.kind = "consumer",
        messaging.system = "delayq",
        messaging.destination.name = %delivery.queue,
        messaging.operation.type = "process",
        messaging.message.id = %delivery.id,
        messaging.delivery.attempt = delivery.attempt,
    );
    let parent = match parent {
        Some(context) => Context::new().with_remote_span_context(context),
        // Not the task's ambient context: a delivery without trace context starts a trace.
        None => Context::new(),
    };
    let _ = span.set_parent(parent);
    span
}

/// The context a `traceparent` names if its trace is sampled: the only kind worth a link.
/// The flags are looked at first, so that an unsampled one (the most, under a sampler)
/// costs no parsing.
fn sampled(traceparent: &str) -> Option<SpanContext> {
    // The sampled flag is the lowest bit of the last hex digit.
    let last = *traceparent.as_bytes().last()?;
    let odd = matches!(last, b'1' | b'3' | b'5' | b'7' | b'9' | b'b' | b'd' | b'f');
    odd.then(|| parse_traceparent(traceparent)).flatten()
}

/// The caller's current context: its current `tracing` span's, else OpenTelemetry's own.
fn current_context() -> Context {
    let from_tracing = tracing::Span::current().context();
    if from_tracing.span().span_context().is_valid() {
        from_tracing
    } else {
        Context::current()
    }
}

fn same_trace(context: &Context, other: &SpanContext) -> bool {
    let own = context.span();
    let own = own.span_context();
    own.is_valid() && own.trace_id() == other.trace_id()
}

fn links_to(contexts: Vec<SpanContext>) -> Vec<Link> {
    contexts.into_iter().map(Link::with_context).collect()
}

fn common(queue: &str, operation_type: &'static str, operation: &'static str) -> Vec<KeyValue> {
    vec![
        KeyValue::new("messaging.system", "delayq"),
        KeyValue::new("messaging.destination.name", queue.to_owned()),
        KeyValue::new("messaging.operation.type", operation_type),
        KeyValue::new("messaging.operation.name", operation),
    ]
}

fn start(
    name: String,
    kind: SpanKind,
    attributes: Vec<KeyValue>,
    parent: &Context,
    links: Vec<Link>,
) -> BoxedSpan {
    let tracer = global::tracer("delayq");
    tracer
        .span_builder(name)
        .with_kind(kind)
        .with_attributes(attributes)
        .with_links(links)
        .start_with_context(&tracer, parent)
}

/// Whether delayq's spans are on: for an application that makes spans of its own around
/// delayq's (the server's HTTP and push spans) only when they are exported.
pub fn is_enabled() -> bool {
    on()
}

/// Makes `span` (not yet entered) a child of the span `traceparent` names; false when the
/// text is not a valid `traceparent` or the span is not exported.
pub fn join_trace(span: &tracing::Span, traceparent: &str) -> bool {
    parse_traceparent(traceparent).is_some_and(|context| {
        span.set_parent(Context::new().with_remote_span_context(context))
            .is_ok()
    })
}

/// `span`'s context as a `traceparent`, to hand to whatever it calls (an HTTP request's
/// header); `None` when the span is not exported.
pub fn traceparent_of(span: &tracing::Span) -> Option<String> {
    format_traceparent(span.context().span().span_context())
}
