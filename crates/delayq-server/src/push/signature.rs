//! Signing pushed requests, so that a receiver can tell delayq sent them and refuse replays.
//!
//! Each request carries `Delayq-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>]`: one `v1`
//! per signing key of the queue's target (two while a key is being rotated), each the
//! HMAC-SHA256, under that key, of `<t>.<body>`. A receiver recomputes it with its key,
//! compares in constant time against any `v1`, and refuses a `t` too far from its own clock
//! ([`verify`] does all of this, and the README shows the same in a few lines of Python).

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// The header that carries the signature.
pub const HEADER: &str = "delayq-signature";

/// The header value for `body` sent at `unix_secs`, signed with each of `keys`.
pub fn sign(keys: &[String], unix_secs: u64, body: &[u8]) -> String {
    let mut value = format!("t={unix_secs}");
    for key in keys {
        value.push_str(",v1=");
        value.push_str(&hex(&mac(key, unix_secs, body)));
    }
    value
}

/// True when `header` (a `Delayq-Signature` value) signs `body` with `key`, at a time no
/// more than `tolerance_secs` from `now_secs`.
pub fn verify(key: &str, header: &str, body: &[u8], now_secs: u64, tolerance_secs: u64) -> bool {
    let mut t = None;
    let mut signatures = Vec::new();
    for part in header.split(',') {
        match part.trim().split_once('=') {
            Some(("t", v)) => t = v.parse::<u64>().ok(),
            Some(("v1", v)) => signatures.push(v.to_owned()),
            _ => {}
        }
    }
    let Some(t) = t else {
        return false;
    };
    if t.abs_diff(now_secs) > tolerance_secs {
        return false;
    }
    let mut expected = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes any key");
    expected.update(format!("{t}.").as_bytes());
    expected.update(body);
    signatures
        .iter()
        .any(|s| unhex(s).is_some_and(|bytes| expected.clone().verify_slice(&bytes).is_ok()))
}

fn mac(key: &str, unix_secs: u64, body: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key.as_bytes()).expect("HMAC takes any key");
    mac.update(format!("{unix_secs}.").as_bytes());
    mac.update(body);
    mac.finalize().into_bytes().to_vec()
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

    #[test]
    fn a_signature_verifies_with_either_key_and_not_after_tampering_or_too_late() {
        let keys = ["new-key".to_owned(), "old-key".to_owned()];
        let header = sign(&keys, 1_700_000_000, b"{\"order\":1234}");
        for key in &keys {
            assert!(verify(
                key,
                &header,
                b"{\"order\":1234}",
                1_700_000_010,
                300
            ));
        }
        assert!(!verify(
            "other-key",
            &header,
            b"{\"order\":1234}",
            1_700_000_010,
            300
        ));
        assert!(!verify(
            "new-key",
            &header,
            b"{\"order\":1235}",
            1_700_000_010,
            300
        ));
        assert!(!verify(
            "new-key",
            &header,
            b"{\"order\":1234}",
            1_700_000_400,
            300
        ));
        assert!(!verify("new-key", "t=x,v1=zz", b"", 0, 300));
        // A known answer, computed with Python's hmac module: what a receiver in another
        // language must get.
        assert_eq!(
            sign(&["key".to_owned()], 1, b"body"),
            "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5"
        );
    }
}
