//! A message's own push destination: the URL and headers that replace its queue target's
//! for this message alone (`"push": {"url", "headers"}` on a send). They travel inside the
//! stored payload, in an envelope, so that they live and die with the message and cost
//! nothing when unused:
//!
//! ```text
//! MAGIC (9 bytes) | JSON length (u32, big-endian) | JSON {"url", "headers"} | payload
//! ```
//!
//! The pusher opens the envelope and sends only the payload; every answer that shows a
//! payload (get, dead letters, deliveries, the failure callback) shows it without the
//! envelope. A payload sent over HTTP that happens to begin with MAGIC is put in an empty
//! envelope, so it is never mistaken for one.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Begins an envelope: a NUL, a name, and a version byte that no text or JSON starts with.
const MAGIC: &[u8; 9] = b"\0dq-push\x01";

/// Where one message goes instead of its queue's target.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Destination {
    /// Replaces the target's URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Added to (and replacing) the target's headers.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

/// `payload` in an envelope with `destination`.
pub fn seal(destination: &Destination, payload: &[u8]) -> Vec<u8> {
    let json = serde_json::to_vec(destination).unwrap_or_default();
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + json.len() + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(json.len() as u32).to_be_bytes());
    out.extend_from_slice(&json);
    out.extend_from_slice(payload);
    out
}

/// Whether `payload` must go in an envelope to be read back as itself.
pub fn looks_sealed(payload: &[u8]) -> bool {
    payload.starts_with(MAGIC)
}

/// The destination and the payload of a stored payload; one that is not in an envelope is
/// its own payload.
pub fn open(stored: &[u8]) -> (Option<Destination>, &[u8]) {
    let Some(rest) = stored.strip_prefix(MAGIC.as_slice()) else {
        return (None, stored);
    };
    let Some((len, rest)) = rest.split_first_chunk::<4>() else {
        return (None, stored);
    };
    let len = u32::from_be_bytes(*len) as usize;
    match (rest.get(..len), rest.get(len..)) {
        (Some(json), Some(payload)) => match serde_json::from_slice(json) {
            Ok(destination) => (Some(destination), payload),
            Err(_) => (None, stored),
        },
        _ => (None, stored),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_envelope_opens_to_what_was_sealed() {
        let destination = Destination {
            url: Some("https://example.com/order/1234".into()),
            headers: BTreeMap::from([("x-tenant".into(), "7".into())]),
        };
        let sealed = seal(&destination, b"{\"close\":1234}");
        assert!(looks_sealed(&sealed));
        assert_eq!(
            open(&sealed),
            (Some(destination), b"{\"close\":1234}".as_slice())
        );
        assert_eq!(open(b"plain"), (None, b"plain".as_slice()));
        // Truncated or garbled envelopes are payloads like any other.
        assert_eq!(open(&sealed[..11]), (None, &sealed[..11]));
        let empty = seal(&Destination::default(), MAGIC);
        assert_eq!(
            open(&empty),
            (Some(Destination::default()), MAGIC.as_slice())
        );
    }
}
