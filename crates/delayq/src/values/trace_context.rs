//! W3C trace context carried with a message: a `traceparent` given at send
//! ([`SendOptions::traceparent`]) is stored with the message (extension field 6,
//! `extension.rs`) and handed back with each delivery ([`Delivery::traceparent`]), so that the
//! handler's work joins the trace of the request that sent it, across the queue.
//!
//! [`Delivery::traceparent`]: crate::Delivery::traceparent

use crate::values::error::InvalidInput;
use crate::values::options::SendOptions;

/// Length of a version-00 `traceparent`: `00-<32 hex>-<16 hex>-<2 hex>`.
pub const TRACEPARENT_LEN: usize = 55;

impl SendOptions {
    /// Carries W3C trace context with the message: `traceparent` as the
    /// [Trace Context](https://www.w3.org/TR/trace-context/) header spells it
    /// (`00-<trace id>-<parent id>-<flags>`, lowercase hex), handed to whoever handles it.
    /// A value that is not one is refused at send ([`InvalidInput::Option`]).
    pub fn traceparent(mut self, traceparent: impl Into<String>) -> Self {
        self.traceparent = Some(traceparent.into());
        self
    }
}

/// Refuses a `traceparent` that is not a valid version-00 one: the wrong length or shape,
/// upper-case or non-hex digits, or an all-zero trace or parent id (which the spec says is
/// invalid).
pub(crate) fn check_traceparent(value: &str) -> Result<(), InvalidInput> {
    let bad = || {
        InvalidInput::Option(format!(
            "traceparent {:?} is not 00-<32 hex>-<16 hex>-<2 hex>",
            value.chars().take(100).collect::<String>()
        ))
    };
    // Byte by byte, without allocating: with tracing on, every message carries one.
    let b = value.as_bytes();
    let lower_hex = |s: &[u8]| s.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let zeros = |s: &[u8]| s.iter().all(|c| *c == b'0');
    let well_formed = b.len() == TRACEPARENT_LEN
        && b.starts_with(b"00-")
        && b[35] == b'-'
        && b[52] == b'-'
        && lower_hex(&b[3..35])
        && lower_hex(&b[36..52])
        && lower_hex(&b[53..55])
        && !zeros(&b[3..35])
        && !zeros(&b[36..52]);
    if well_formed {
        Ok(())
    } else {
        Err(bad())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_well_formed_traceparents_pass() {
        let good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        assert_eq!(good.len(), TRACEPARENT_LEN);
        assert!(check_traceparent(good).is_ok());
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xx",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
        ] {
            assert!(check_traceparent(bad).is_err(), "{bad:?}");
        }
    }
}
