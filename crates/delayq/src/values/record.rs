//! The bytes stored for one message. Layout (shared with the scripts' prelude):
//!
//! ```text
//! [7] due µs, big-endian    } the sort key; written by the script, which knows the
//! [6] sequence, big-endian  } server's time and allocates the sequence; its top 4 bits
//!                              hold the priority (0 for the default, else priority + 1)
//! [1] flags: 1 explicit id, 2 exponential, 4 factor byte, 8 jitter byte, 16 JSON payload,
//!     32 linear, 64 list of delays, 128 handler timeout
//! [2] attempts so far  [2] max attempts           (big-endian u16)
//! policy: varint base ms (the count, for a list), [varint cap ms] (exponential, linear) or
//!         [count varint ms] (list), [factor], [jitter %], [varint handler timeout ms]
//! [extension area]: varint length, then fields of [tag u8][varint length][value]
//! [1+n] id length and id, only for explicit ids; a generated id is `<due µs>-<seq>`
//! payload
//! ```
//!
//! Room to grow (data format 2): the flags byte is full, so the extension area is announced
//! by the backoff kind bits (2, 32, 64). A kind sets at most one of them (none: a fixed
//! delay); a record with an extension area sets the *complement* of its kind's bits, which
//! always sets two or three. So every format-1 record reads the same under format 2 and none
//! is rewritten by an upgrade. A later field is a new tag: a reader skips the tags it does
//! not know and every move of the record carries them unchanged (the scripts copy the policy
//! with its extension area whole). A field that an older reader may ignore (tracing context)
//! needs no new format; one whose neglect would break a promise (a group key, an expiry)
//! comes with a new format, so older processes are kept out of the queue until they are
//! upgraded (the store's format gate).
//!
//! One Redis value holds the whole message, so a pending 100-byte message costs one sorted
//! set entry and nothing else; the header stays small enough that such a record fits
//! jemalloc's 128-byte size class.

use crate::values::error::Error;
use crate::values::extension::{self, put_varint, read_varint};
use crate::values::send_fields;
use std::time::Duration;

use crate::values::options::{Backoff, PayloadKind, SendOptions, DEFAULT_PRIORITY, MAX_PRIORITY};

/// Sequence numbers count below this; the bits above hold the message's priority, which so
/// travels with the message through every state without a byte of its own (the scripts' prelude).
pub(crate) const LEVEL: u64 = 1 << 44;

/// The priority a sequence number carries.
pub(crate) fn priority_of(seq: u64) -> u8 {
    match seq / LEVEL {
        0 => DEFAULT_PRIORITY,
        level => (level - 1).min(u64::from(MAX_PRIORITY)) as u8,
    }
}

/// What a message of priority `priority` adds to its sequence number.
pub(crate) fn level_base(priority: u8) -> u64 {
    if priority == DEFAULT_PRIORITY {
        0
    } else {
        (u64::from(priority) + 1) * LEVEL
    }
}

const F_ID: u8 = 1;
const F_EXP: u8 = 2;
const F_FACTOR: u8 = 4;
const F_JITTER: u8 = 8;
const F_JSON: u8 = 16;
const F_LINEAR: u8 = 32;
const F_STEPS: u8 = 64;
const F_TIMEOUT: u8 = 128;
/// The backoff kind bits: one of them, or none for a fixed delay; their complement when an
/// extension area follows the policy.
const KIND_BITS: u8 = F_EXP | F_LINEAR | F_STEPS;

/// The backoff kind of `flags` (one of its kind bits, or 0 for a fixed delay) and whether an
/// extension area follows the record's policy.
fn kind_and_extension(flags: u8) -> (u8, bool) {
    let bits = flags & KIND_BITS;
    if bits.count_ones() >= 2 {
        (KIND_BITS ^ bits, true)
    } else {
        (bits, false)
    }
}

/// The record without its sort key, as the send script takes it. Options must be validated.
pub(crate) fn encode_body(options: &SendOptions, payload: &[u8]) -> Vec<u8> {
    let (id, backoff) = (options.id.as_deref(), &options.backoff);
    let (max_attempts, kind) = (options.max_attempts, options.kind);
    let mut out = Vec::with_capacity(payload.len() + 16 + id.map_or(0, |i| i.len() + 1));
    out.push(0); // flags, filled in below
    out.extend_from_slice(&0u16.to_be_bytes());
    out.extend_from_slice(&max_attempts.to_be_bytes());
    let mut flags = match kind {
        PayloadKind::Json => F_JSON,
        PayloadKind::Bytes => 0,
    };
    match *backoff {
        Backoff::Fixed { delay, .. } => put_varint(&mut out, delay.as_millis() as u64),
        Backoff::Exponential {
            base, cap, factor, ..
        } => {
            flags |= F_EXP;
            put_varint(&mut out, base.as_millis() as u64);
            put_varint(&mut out, cap.as_millis() as u64);
            if factor != 2 {
                flags |= F_FACTOR;
                out.push(factor);
            }
        }
        Backoff::Linear { base, cap, .. } => {
            flags |= F_LINEAR;
            put_varint(&mut out, base.as_millis() as u64);
            put_varint(&mut out, cap.as_millis() as u64);
        }
        Backoff::Steps { delays, .. } => {
            flags |= F_STEPS;
            put_varint(&mut out, delays.ms().len() as u64);
            for ms in delays.ms() {
                put_varint(&mut out, *ms);
            }
        }
    }
    let jitter = backoff.jitter_percent();
    if jitter != 0 {
        flags |= F_JITTER;
        out.push(jitter);
    }
    if let Some(timeout) = options.handler_timeout {
        flags |= F_TIMEOUT;
        put_varint(&mut out, timeout.as_millis() as u64);
    }
    let fields: Vec<(u8, &[u8])> = send_fields::fields_of(options)
        .iter()
        .map(|f| (f.tag, f.value))
        .collect();
    if !fields.is_empty() {
        // The area follows the policy; the kind bits announce it (their complement).
        let (kind, _) = kind_and_extension(flags);
        flags = (flags & !KIND_BITS) | (KIND_BITS ^ kind);
        let area = extension::encode(&fields);
        put_varint(&mut out, area.len() as u64);
        out.extend_from_slice(&area);
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

/// The id delayq gives a message without a caller id: `<due µs>-<sequence>`, which is exactly
/// what locates its record (`find_pending` in the scripts' prelude decodes it).
pub(crate) fn generated_id(due_us: u64, seq: u64) -> String {
    format!("{due_us}-{seq}")
}

/// The whole record: sort key (due µs, sequence) then the body.
pub(crate) fn with_sort_key(due_us: u64, seq: u64, body: &[u8]) -> Vec<u8> {
    let mut rec = Vec::with_capacity(13 + body.len());
    rec.extend_from_slice(&due_us.to_be_bytes()[1..]);
    rec.extend_from_slice(&seq.to_be_bytes()[2..]);
    rec.extend_from_slice(body);
    rec
}

/// A record as a claim returns it, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Decoded {
    pub(crate) due_us: u64,
    /// The 6 sequence bytes that name the message while it is in flight.
    pub(crate) seq: [u8; 6],
    pub(crate) attempts: u16,
    pub(crate) max_attempts: u16,
    pub(crate) id: String,
    /// The id was given by the caller (or the message moved), rather than generated.
    pub(crate) explicit_id: bool,
    pub(crate) kind: PayloadKind,
    /// How long a worker's handler may run on it, if the sender said.
    pub(crate) handler_timeout: Option<Duration>,
    pub(crate) priority: u8,
    /// The message's group ([`SendOptions::group`]), from the extension area.
    pub(crate) group: Option<String>,
    /// Its deadline, unix ms ([`SendOptions::ttl`]), from the extension area.
    pub(crate) deadline_ms: Option<u64>,
    /// Its W3C trace context, from the extension area.
    pub(crate) traceparent: Option<String>,
    /// Whether the payload is sealed (`sealing.rs`): then `payload` is the sealed bytes.
    pub(crate) sealed: bool,
    pub(crate) payload: Vec<u8>,
}

/// Smallest valid record: sort key 13, flags 1, attempts 2, max attempts 2, and a one-byte
/// varint backoff (empty payload, generated id, fixed backoff under 128 ms).
const MIN_RECORD: usize = 19;

/// The 6 sequence bytes of a record's sort key (zeros where the record is too short).
pub(crate) fn seq_of(rec: &[u8]) -> [u8; 6] {
    let mut seq = [0u8; 6];
    if let Some(bytes) = rec.get(7..13) {
        seq.copy_from_slice(bytes);
    }
    seq
}

/// Takes a whole record (with its sort key) apart.
pub(crate) fn decode(mut rec: Vec<u8>) -> Result<Decoded, Error> {
    let bad = || Error::Protocol(format!("malformed record of {} bytes", rec.len()));
    if rec.len() < MIN_RECORD {
        return Err(bad());
    }
    let due_us = rec[..7].iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
    let seq = seq_of(&rec);
    let flags = rec[13];
    let attempts = u16::from_be_bytes([rec[14], rec[15]]);
    let max_attempts = u16::from_be_bytes([rec[16], rec[17]]);
    let (mut at, handler_timeout, area) = policy_end(&rec, flags).ok_or_else(bad)?;
    let fields = match area {
        Some(area) => rec.get(area).and_then(extension::decode).ok_or_else(bad)?,
        None => extension::Fields::default(),
    };
    let id = if flags & F_ID != 0 {
        let len = usize::from(*rec.get(at).ok_or_else(bad)?);
        let id = rec.get(at + 1..at + 1 + len).ok_or_else(bad)?;
        let id = String::from_utf8(id.to_vec()).map_err(|_| bad())?;
        at += 1 + len;
        id
    } else {
        let seq_n = seq.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        generated_id(due_us, seq_n)
    };
    if at > rec.len() {
        return Err(bad());
    }
    let payload = rec.split_off(at);
    let seq_n = seq.iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
    Ok(Decoded {
        priority: priority_of(seq_n),
        due_us,
        seq,
        attempts,
        max_attempts,
        id,
        explicit_id: flags & F_ID != 0,
        kind: kind_of(flags),
        handler_timeout,
        group: fields.group,
        deadline_ms: fields.deadline_ms,
        traceparent: fields.traceparent,
        sealed: fields.sealed,
        payload,
    })
}

/// Where the retry policy of whole record `rec` (flags `flags`) ends, which is where its id
/// (if explicit) or else its payload starts; the handler timeout the policy carries; and
/// where its extension area's fields lie, if it has one.
type PolicyEnd = (usize, Option<Duration>, Option<std::ops::Range<usize>>);

fn policy_end(rec: &[u8], flags: u8) -> Option<PolicyEnd> {
    let mut at = 18;
    let first = read_varint(rec, &mut at)?;
    let (kind, extension) = kind_and_extension(flags);
    let more = match kind {
        F_STEPS => first,
        0 => 0,
        _ => 1,
    };
    for _ in 0..more {
        read_varint(rec, &mut at)?;
    }
    at += usize::from(flags & F_FACTOR != 0) + usize::from(flags & F_JITTER != 0);
    let handler_timeout = if flags & F_TIMEOUT != 0 {
        Some(Duration::from_millis(read_varint(rec, &mut at)?))
    } else {
        None
    };
    let mut area = None;
    if extension {
        let length = read_varint(rec, &mut at)?;
        let end = at.checked_add(usize::try_from(length).ok()?)?;
        area = Some(at..end);
        at = end;
    }
    Some((at, handler_timeout, area))
}

/// Record body `body` (as [`encode_body`] made it, without an id) with caller id `id` put in:
/// what a recurring schedule stores once and sends at every tick under that tick's id. None
/// when `body` is not such a body.
pub(crate) fn body_with_id(body: &[u8], id: &str) -> Option<Vec<u8>> {
    let rec = with_sort_key(0, 0, body);
    let flags = *rec.get(13)?;
    if flags & F_ID != 0 || id.len() > usize::from(u8::MAX) {
        return None;
    }
    let (at, _, _) = policy_end(&rec, flags)?;
    let at = at.checked_sub(13).filter(|at| *at <= body.len())?;
    let mut out = Vec::with_capacity(body.len() + 1 + id.len());
    out.push(flags | F_ID);
    out.extend_from_slice(&body[1..at]);
    out.push(id.len() as u8);
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(&body[at..]);
    Some(out)
}

/// Record body `body` (as [`encode_body`] made it) with `sealed`, a sealed payload
/// (`sealing.rs`), in place of its payload, and its extension area marking it sealed: what a
/// schedule defined before its queue began to encrypt sends. None when `body` is not such a
/// body.
pub(crate) fn with_sealed_payload(body: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
    let rec = with_sort_key(0, 0, body);
    let flags = *rec.get(13)?;
    let (kind, _) = kind_and_extension(flags);
    let (at, _, area) = policy_end(&rec, flags)?;
    // Where the policy ends (and the area's length starts, if it has one), and the area.
    let (policy_to, mut area_bytes) = match area {
        Some(area) => {
            let bytes = rec.get(area.clone())?.to_vec();
            let mut length = Vec::new();
            put_varint(&mut length, bytes.len() as u64);
            (area.start.checked_sub(length.len())?, bytes)
        }
        None => (at, Vec::new()),
    };
    if !extension::decode(&area_bytes)?.sealed {
        area_bytes.extend(extension::encode(&[(
            extension::TAG_KEY,
            extension::SEALED_V1,
        )]));
    }
    let id_len = match flags & F_ID {
        0 => 0,
        _ => 1 + usize::from(*rec.get(at)?),
    };
    let mut out = vec![(flags & !KIND_BITS) | (KIND_BITS ^ kind)];
    out.extend_from_slice(rec.get(14..policy_to)?);
    put_varint(&mut out, area_bytes.len() as u64);
    out.extend_from_slice(&area_bytes);
    out.extend_from_slice(rec.get(at..at + id_len)?);
    out.extend_from_slice(sealed);
    Some(out)
}

/// The payload kind a record's flags byte names.
pub(crate) fn kind_of(flags: u8) -> PayloadKind {
    if flags & F_JSON != 0 {
        PayloadKind::Json
    } else {
        PayloadKind::Bytes
    }
}

/// A lease's name in Redis (a member of the `leases` set): sequence bytes then the 48-bit
/// token, big-endian.
pub(crate) fn lease_member(seq: [u8; 6], token: u64) -> [u8; 12] {
    let mut member = [0u8; 12];
    member[..6].copy_from_slice(&seq);
    member[6..].copy_from_slice(&token.to_be_bytes()[2..]);
    member
}

/// Record body `body` (as [`encode_body`] made it, without an extension area) with an
/// extension area of `fields` (tag, value) put in; the body unchanged if it has an area
/// already. The tests write fields unknown to this delayq with it, as a later one would.
pub(crate) fn with_extension(body: &[u8], fields: &[(u8, &[u8])]) -> Vec<u8> {
    let rec = with_sort_key(0, 0, body);
    let (kind, extension) = kind_and_extension(rec[13]);
    let Some((at, _, _)) = policy_end(&rec, rec[13]).filter(|_| !extension) else {
        return body.to_vec();
    };
    let area = extension::encode(fields);
    let mut out = vec![(body[0] & !KIND_BITS) | (KIND_BITS ^ kind)];
    out.extend_from_slice(&body[1..at - 13]);
    put_varint(&mut out, area.len() as u64);
    out.extend_from_slice(&area);
    out.extend_from_slice(&body[at - 13..]);
    out
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_record_with_fields_this_delayq_does_not_know_reads_as_without() {
        let backoffs = [
            Backoff::fixed(Duration::from_secs(300)),
            Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60)).with_factor(3),
            Backoff::linear(Duration::from_secs(30), Duration::from_secs(600)).with_jitter(5),
            Backoff::steps(&[Duration::from_secs(30), Duration::from_secs(120)]),
        ];
        for (backoff, id) in backoffs.iter().flat_map(|b| [(b, None), (b, Some("o-1"))]) {
            let mut options = SendOptions::new().backoff(*backoff).max_attempts(7);
            options.id = id.map(str::to_owned);
            options.handler_timeout = Some(Duration::from_secs(4));
            let body = encode_body(&options, b"payload");
            let extended = with_extension(&body, &[(200, b"later"), (201, &[0; 300])]);
            let (plain, rich) = (
                decode(with_sort_key(9, 3, &body)).expect("plain"),
                decode(with_sort_key(9, 3, &extended)).expect("extended"),
            );
            assert_eq!(plain, rich, "{backoff:?} {id:?}");
            assert_eq!(kind_and_extension(body[0]), (body[0] & KIND_BITS, false));
            assert_eq!(kind_and_extension(extended[0]), (body[0] & KIND_BITS, true));
            if id.is_none() {
                let given = body_with_id(&extended, "tick-1").expect("an extended body");
                let expected = with_extension(
                    &body_with_id(&body, "tick-1").expect("a body"),
                    &[(200, b"later"), (201, &[0; 300])],
                );
                assert_eq!(given, expected, "the id goes after the extension area");
            }
        }
    }

    #[test]
    fn a_sealed_payload_put_in_reads_as_one_sent_sealed() {
        let traced = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
        let backoff = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
        for options in [
            SendOptions::new(),
            SendOptions::new().id("o-1").backoff(backoff.with_jitter(5)),
            SendOptions::new().group("g").traceparent(traced),
            SendOptions::new().id("o-2").traceparent(traced),
        ] {
            let mut sealed_options = options.clone();
            sealed_options.sealed = true;
            let direct = encode_body(&sealed_options, b"SEALED");
            let put_in = with_sealed_payload(&encode_body(&options, b"plain"), b"SEALED");
            assert_eq!(put_in.as_deref(), Some(&direct[..]), "{options:?}");
            let again = with_sealed_payload(&direct, b"AGAIN").expect("a sealed body");
            let d = decode(with_sort_key(1, 2, &again)).expect("well formed");
            assert!(d.sealed);
            assert_eq!(d.payload, b"AGAIN", "sealed once, the payload replaced");
        }
    }

    #[test]
    fn default_header_is_small() {
        let body = encode_body(&SendOptions::new(), &[b'x'; 100]);
        // 13-byte sort key + body must stay within 124 bytes (128 with Redis' sds header).
        assert!(
            13 + body.len() <= 124,
            "record is {} bytes",
            13 + body.len()
        );
    }

    #[test]
    fn decode_reads_what_encode_wrote() {
        let key = [0, 0, 0, 0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 7];
        assert_eq!(with_sort_key(0x1234, 7, b""), key);
        let backoffs = [
            Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60))
                .with_factor(3)
                .with_jitter(5),
            Backoff::fixed(Duration::from_secs(300)).with_jitter(10),
            Backoff::linear(Duration::from_secs(30), Duration::from_secs(600)),
            Backoff::steps(&[
                Duration::from_secs(30),
                Duration::from_secs(120),
                Duration::from_secs(600),
            ])
            .with_jitter(20),
        ];
        let timeouts = [None, Some(Duration::from_millis(90_000))];
        for ((id, backoff), timeout) in [None, Some("order-1")]
            .into_iter()
            .flat_map(|id| backoffs.iter().map(move |b| (id, b)))
            .flat_map(|ib| timeouts.map(|t| (ib, t)))
        {
            let mut options = SendOptions::new()
                .max_attempts(9)
                .backoff(*backoff)
                .kind(PayloadKind::Json);
            options.id = id.map(str::to_owned);
            options.handler_timeout = timeout;
            let mut rec = key.to_vec();
            rec.extend(encode_body(&options, b"\x00payload"));
            let d = decode(rec).expect("well formed");
            assert_eq!(d.due_us, 0x1234);
            assert_eq!(d.seq, [0, 0, 0, 0, 0, 7]);
            assert_eq!(d.attempts, 0);
            assert_eq!(d.id, id.unwrap_or("4660-7"));
            assert_eq!(d.payload, b"\x00payload");
            assert_eq!(d.kind, PayloadKind::Json);
            assert_eq!(d.handler_timeout, timeout);
        }
        assert!(decode(key.to_vec()).is_err(), "truncated record accepted");
    }

    #[test]
    fn a_caller_id_goes_in_where_encode_would_put_it() {
        let backoff = Backoff::exponential(Duration::from_secs(1), Duration::from_secs(60));
        let options = SendOptions::new()
            .backoff(backoff.with_jitter(5))
            .handler_timeout(Duration::from_secs(9))
            .kind(PayloadKind::Json);
        let body = encode_body(&options, b"{}");
        let with_id = body_with_id(&body, "sched:daily:1700000000000");
        let direct = encode_body(&options.id("sched:daily:1700000000000"), b"{}");
        assert_eq!(with_id, Some(direct.clone()));
        assert_eq!(
            body_with_id(&direct, "again"),
            None,
            "a body with an id already"
        );
        assert_eq!(body_with_id(&body[..3], "x"), None, "a truncated body");
    }

    #[test]
    fn the_smallest_record_decodes() {
        let options = SendOptions::new()
            .max_attempts(1)
            .backoff(Backoff::fixed(Duration::ZERO));
        let body = encode_body(&options, b"");
        let rec = with_sort_key(5, 6, &body);
        assert_eq!(rec.len(), MIN_RECORD);
        let d = decode(rec.clone()).expect("the smallest record is valid");
        assert_eq!((d.id.as_str(), d.payload.len()), ("5-6", 0));
        assert!(decode(rec[..MIN_RECORD - 1].to_vec()).is_err());
    }

    #[test]
    fn layout() {
        let options = SendOptions::new()
            .id("ab")
            .max_attempts(3)
            .backoff(Backoff::fixed(Duration::from_millis(300)));
        let body = encode_body(&options, b"p");
        assert_eq!(body, [F_ID, 0, 0, 0, 3, 0xac, 0x02, 2, b'a', b'b', b'p']);
        let body = encode_body(&options.handler_timeout(Duration::from_secs(1)), b"p");
        let (policy_and_timeout, id) = (&body[5..9], &body[9..]);
        assert_eq!(body[0], F_ID | F_TIMEOUT);
        assert_eq!(policy_and_timeout, [0xac, 0x02, 0xe8, 0x07]);
        assert_eq!(id, [2, b'a', b'b', b'p']);
    }
}
