//! W3C `traceparent` text to and from OpenTelemetry's span context.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// The span context a version-00 `traceparent` names (as a remote parent), or `None` when
/// the text is not one.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    crate::trace_context::check_traceparent(text).ok()?;
    let mut parts = text.split('-').skip(1);
    let trace = TraceId::from_hex(parts.next()?).ok()?;
    let span = SpanId::from_hex(parts.next()?).ok()?;
    let flags = u8::from_str_radix(parts.next()?, 16).ok()?;
    Some(SpanContext::new(
        trace,
        span,
        TraceFlags::new(flags),
        true,
        TraceState::default(),
    ))
}

/// The `traceparent` that names `context` as the parent, or `None` for an invalid context.
pub fn format_traceparent(context: &SpanContext) -> Option<String> {
    context.is_valid().then(|| {
        format!(
            "00-{}-{}-{:02x}",
            context.trace_id(),
            context.span_id(),
            context.trace_flags().to_u8()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_traceparent_goes_through_a_span_context_unchanged() {
        let text = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let context = parse_traceparent(text).expect("valid");
        assert!(context.is_remote() && context.is_sampled());
        assert_eq!(format_traceparent(&context).as_deref(), Some(text));
        assert!(parse_traceparent("00-nothex").is_none());
        assert_eq!(format_traceparent(&SpanContext::empty_context()), None);
    }
}
