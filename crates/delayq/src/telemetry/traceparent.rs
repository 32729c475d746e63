//! W3C `traceparent` text to and from OpenTelemetry's span context.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// The span context a version-00 `traceparent` names (as a remote parent), or `None` when
/// the text is not one.
pub fn parse_traceparent(text: &str) -> Option<SpanContext> {
    crate::values::trace_context::check_traceparent(text).ok()?;
    let trace = TraceId::from_hex(&text[3..35]).ok()?;
    let span = SpanId::from_hex(&text[36..52]).ok()?;
    let flags = u8::from_str_radix(&text[53..55], 16).ok()?;
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
        // What check_traceparent refuses, this refuses.
        for bad in [
            "00-nothex",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        ] {
            assert!(
                crate::values::trace_context::check_traceparent(bad).is_err(),
                "{bad}"
            );
            assert!(parse_traceparent(bad).is_none(), "{bad}");
        }
        assert_eq!(format_traceparent(&SpanContext::empty_context()), None);
    }
}
