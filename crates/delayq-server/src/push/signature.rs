//! Signing pushed requests, so that a receiver can tell delayq sent them and refuse replays.
//!
//! Each request carries `Delayq-Signature: t=<unix seconds>,v1=<hex>,v2=<hex>`, with a `v1`
//! and a `v2` per signing key of the queue's target (two keys while one is being rotated):
//!
//! * `v2`, the HMAC-SHA256 under the key of `<t>\n<queue>\n<id>\n<attempt>\n<body>` (the
//!   `Delayq-Queue`, `Delayq-Message-Id` and `Delayq-Attempt` headers' values). It binds the
//!   body to its message and attempt, so a captured request cannot be replayed as another
//!   attempt, another message or to another queue's receiver. Lines, not dots, separate
//!   the fields: queue names and ids may hold dots, never a newline.
//! * `v1`, deprecated: the HMAC of `<t>.<body>` alone, kept so that receivers which verify
//!   it go on working across an upgrade. Move them to `v2`.
//!
//! A receiver recomputes `v2` with its key, compares in constant time against any `v2`,
//! refuses a `t` more than a few minutes (300 s) from its own clock, and, since delivery is
//! at least once, treats a message id and attempt it has already handled as done.
//! [`verify`] does all of this but the last; the README shows the same in Python. A failure
//! callback is signed the same way, as attempt 0.
//!
//! A webhook's request (an event) carries besides them a `w1` per key, the HMAC of
//! `<t>\n<queue>\n<event id>\n<body>` (the `Delayq-Event-Id` header's value): one message
//! has many events under one message id and attempt, so a webhook's receiver tells events
//! apart, and drops those it has handled, by their event id, which `w1` binds
//! ([`verify_event`]).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const HEADER: &str = "delayq-signature";

/// What a signature covers besides its time: a request's queue, message id, attempt and
/// body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Signed<'a> {
    /// `Delayq-Queue`.
    pub queue: &'a str,
    /// `Delayq-Message-Id`.
    pub id: &'a str,
    /// `Delayq-Attempt` (0 for a failure callback).
    pub attempt: u32,
    /// The request body.
    pub body: &'a [u8],
}

/// What a webhook request's `w1` covers besides its time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignedEvent<'a> {
    /// `Delayq-Queue`.
    pub queue: &'a str,
    /// `Delayq-Event-Id`.
    pub event_id: &'a str,
    /// The request body.
    pub body: &'a [u8],
}

/// A webhook request's header value: [`sign`]'s, and a `w1` per key for `event`.
pub fn sign_event(
    keys: &[String],
    unix_secs: u64,
    signed: &Signed<'_>,
    event: &SignedEvent<'_>,
) -> String {
    let mut value = sign(keys, unix_secs, signed);
    for key in keys {
        value.push_str(",w1=");
        value.push_str(&hex(&w1(key, unix_secs, event).finalize().into_bytes()));
    }
    value
}

/// True when `header` has a `w1` that signs `event` with `key`, at a time no more than
/// `tolerance_secs` from `now_secs`.
pub fn verify_event(
    key: &str,
    header: &str,
    event: &SignedEvent<'_>,
    now_secs: u64,
    tolerance_secs: u64,
) -> bool {
    verify_version(header, "w1", (now_secs, tolerance_secs), |t| {
        w1(key, t, event)
    })
}

/// True when `header` has a signature of `version` that `mac_at(t)` makes, its time `t` no
/// more than the tolerance from now (`(now, tolerance)`, seconds).
fn verify_version(
    header: &str,
    version: &str,
    (now_secs, tolerance_secs): (u64, u64),
    mac_at: impl Fn(u64) -> Hmac<Sha256>,
) -> bool {
    let (t, signatures) = parts(header, version);
    let Some(t) = t else {
        return false;
    };
    if t.abs_diff(now_secs) > tolerance_secs {
        return false;
    }
    let expected = mac_at(t);
    signatures
        .iter()
        .any(|s| unhex(s).is_some_and(|bytes| expected.clone().verify_slice(&bytes).is_ok()))
}

/// A signature header's time, and its signatures of version `version`.
fn parts<'h>(header: &'h str, version: &str) -> (Option<u64>, Vec<&'h str>) {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<u64>().ok(),
            Some((name, v)) if name == version => signatures.push(v),
            _ => {}
        }
    }
    (t, signatures)
}

/// The HMAC of `<t>\n<queue>\n<event id>\n<body>`, not yet finalized.
fn w1(key: &str, unix_secs: u64, event: &SignedEvent<'_>) -> Hmac<Sha256> {
    let mut mac = keyed(key);
    mac.update(format!("{unix_secs}\n{}\n{}\n", event.queue, event.event_id).as_bytes());
    mac.update(event.body);
    mac
}

/// The header value for `signed` at `unix_secs`, signed with each of `keys`.
pub fn sign(keys: &[String], unix_secs: u64, signed: &Signed<'_>) -> String {
    let mut value = format!("t={unix_secs}");
    for key in keys {
        value.push_str(",v1=");
        value.push_str(&hex(&v1(key, unix_secs, signed.body)
            .finalize()
            .into_bytes()));
        value.push_str(",v2=");
        value.push_str(&hex(&v2(key, unix_secs, signed).finalize().into_bytes()));
    }
    value
}

/// True when `header` (a `Delayq-Signature` value) has a `v2` that signs `signed` with `key`,
/// at a time no more than `tolerance_secs` from `now_secs`.
pub fn verify(
    key: &str,
    header: &str,
    signed: &Signed<'_>,
    now_secs: u64,
    tolerance_secs: u64,
) -> bool {
    verify_version(header, "v2", (now_secs, tolerance_secs), |t| {
        v2(key, t, signed)
    })
}

/// The HMAC of `<t>\n<queue>\n<id>\n<attempt>\n<body>`, not yet finalized.
fn v2(key: &str, unix_secs: u64, signed: &Signed<'_>) -> Hmac<Sha256> {
    let mut mac = keyed(key);
    mac.update(
        format!(
            "{unix_secs}\n{}\n{}\n{}\n",
            signed.queue, signed.id, signed.attempt
        )
        .as_bytes(),
    );
    mac.update(signed.body);
    mac
}

/// The HMAC of `<t>.<body>` (deprecated), not yet finalized.
fn v1(key: &str, unix_secs: u64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = keyed(key);
    mac.update(format!("{unix_secs}.").as_bytes());
    mac.update(body);
    mac
}

fn keyed(key: &str) -> Hmac<Sha256> {
    // HMAC takes a key of any length (a long one is hashed first): this cannot fail.
    match Hmac::<Sha256>::new_from_slice(key.as_bytes()) {
        Ok(mac) => mac,
        Err(_) => unreachable!("HMAC takes keys of any length"),
    }
}

/// `bytes` as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A new random signing key: 32 bytes, hex.
pub fn new_key() -> String {
    hex(&rand_bytes())
}

/// The signing keys of a push target or a queue's webhooks being set: those given, else the
/// keys of what they replace (so receivers need not change theirs), else a new one.
pub fn keys_to_set(given: Option<Vec<String>>, replaced: Option<Vec<String>>) -> Vec<String> {
    match (given, replaced) {
        (Some(keys), _) => keys,
        (None, Some(old)) => old,
        (None, None) => vec![new_key()],
    }
}

fn rand_bytes() -> [u8; 32] {
    let mut out = [0u8; 32];
    for chunk in out.chunks_mut(8) {
        chunk.copy_from_slice(&rand::random::<u64>().to_le_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: Signed<'static> = Signed {
        queue: "orders",
        id: "close-1234",
        attempt: 2,
        body: b"{\"order\":1234}",
    };

    #[test]
    fn a_signature_verifies_with_either_key_and_not_after_tampering_or_too_late() {
        let keys = ["new-key".to_owned(), "old-key".to_owned()];
        let header = sign(&keys, 1_700_000_000, &ORDER);
        for key in &keys {
            assert!(verify(key, &header, &ORDER, 1_700_000_010, 300));
        }
        assert!(!verify("other-key", &header, &ORDER, 1_700_000_010, 300));
        let tampered = [
            Signed {
                body: b"{\"order\":1235}",
                ..ORDER
            },
            Signed {
                attempt: 3,
                ..ORDER
            },
            Signed {
                id: "close-1235",
                ..ORDER
            },
            Signed {
                queue: "refunds",
                ..ORDER
            },
            // The fields' boundaries are part of what is signed.
            Signed {
                queue: "orders\nclose-1234",
                id: "",
                ..ORDER
            },
        ];
        for signed in tampered {
            assert!(
                !verify("new-key", &header, &signed, 1_700_000_010, 300),
                "{signed:?}"
            );
        }
        assert!(!verify("new-key", &header, &ORDER, 1_700_000_400, 300));
        assert!(!verify("new-key", "t=x,v2=zz", &ORDER, 0, 300));
        // A v1 alone (a request signed before v2) does not pass verify().
        let v1_only: String = header
            .split(',')
            .filter(|p| !p.starts_with("v2="))
            .collect::<Vec<_>>()
            .join(",");
        assert!(!verify("new-key", &v1_only, &ORDER, 1_700_000_010, 300));
    }

    #[test]
    fn known_answers_computed_with_pythons_hmac_module() {
        // What a receiver in another language must get, v1 (the body alone) as before.
        let signed = Signed {
            body: b"body",
            ..ORDER
        };
        assert_eq!(
            sign(&["key".to_owned()], 1, &signed),
            "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5,\
             v2=80755dc13779b3023f019d27621185b6d160d67896fd5fa599eed19b4dfc5dd0"
        );
    }
}
