//! The bytes stored for one message. Layout (shared with `scripts/prelude.lua`):
//!
//! ```text
//! [7] due µs, big-endian    } the sort key; written by the script, which knows the
//! [6] sequence, big-endian  } server's time and allocates the sequence
//! [1] flags: 1 explicit id, 2 exponential, 4 factor byte, 8 jitter byte
//! [2] attempts so far  [2] max attempts           (big-endian u16)
//! policy: varint base ms, [varint cap ms], [factor], [jitter %]
//! [1+n] id length and id, only for explicit ids; a generated id is `<due µs>-<seq>`
//! payload
//! ```
//!
//! One Redis value holds the whole message, so a pending 100-byte message costs one sorted
//! set entry and nothing else; the header stays small enough that such a record fits
//! jemalloc's 128-byte size class.

use crate::options::Backoff;

const F_ID: u8 = 1;
const F_EXP: u8 = 2;
const F_FACTOR: u8 = 4;
const F_JITTER: u8 = 8;

/// The record without its sort key, as `send.lua` takes it. Options must be validated.
pub(crate) fn encode_body(
    id: Option<&str>,
    max_attempts: u16,
    backoff: &Backoff,
    payload: &[u8],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + 16 + id.map_or(0, |i| i.len() + 1));
    out.push(0); // flags, filled in below
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&max_attempts.to_be_bytes());
    let mut flags = 0;
    match *backoff {
        Backoff::Fixed { delay } => put_varint(&mut out, delay.as_millis() as u64),
        Backoff::Exponential {
            base,
            cap,
            factor,
            jitter_percent,
        } => {
            flags |= F_EXP;
            put_varint(&mut out, base.as_millis() as u64);
            put_varint(&mut out, cap.as_millis() as u64);
            if factor != 2 {
                flags |= F_FACTOR;
                out.push(factor);
            }
            if jitter_percent != 0 {
                flags |= F_JITTER;
                out.push(jitter_percent);
            }
        }
    }
    if let Some(id) = id {
        flags |= F_ID;
        out.push(id.len() as u8);
        out.extend_from_slice(id.as_bytes());
    }
    out[0] = flags;
    out.extend_from_slice(payload);
    out
}

fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn default_header_is_small() {
        let body = encode_body(None, 5, &Backoff::default(), &[b'x'; 100]);
        // 13-byte sort key + body must stay within 124 bytes (128 with Redis' sds header).
        assert!(
            13 + body.len() <= 124,
            "record is {} bytes",
            13 + body.len()
        );
    }

    #[test]
    fn layout() {
        let body = encode_body(
            Some("ab"),
            3,
            &Backoff::fixed(Duration::from_millis(300)),
            b"p",
        );
        assert_eq!(body, [F_ID, 0, 0, 0, 3, 0xac, 0x02, 2, b'a', b'b', b'p']);
    }
}
