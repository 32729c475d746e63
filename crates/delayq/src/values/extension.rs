//! The record's extension area (data format 2): the fields a message gained after format 1,
//! each `[tag u8][varint length][value]`, in one area announced by the record header
//! (`record.rs` says how). A reader takes the tags it knows and skips the rest, so a field
//! that an older reader may ignore needs no new format; one that it must not ignore comes
//! with a format of its own (the store's format gate), which keeps older processes out of the queue.
//!
//! Tags so far:
//! * 1, the message's group (data format 3, [`GROUPS_FORMAT`]): 1 to 128 bytes. Scripts read
//!   it (the scripts' group helpers): it decides where a pending message waits and whose turn it takes.
//! * 2, the message's deadline (data format 4, [`EXPIRY_FORMAT`]): unix ms, 8 bytes
//!   big-endian. The client writes zeros; the send script writes the time, by the server's
//!   clock (the scripts' expiry helpers say what a deadline does).
//! * 3, a debounced message's latest due time ([`OnDuplicate::Debounce`]): unix ms, 8 bytes
//!   big-endian, written as the deadline is. Only a later debounce of the same id reads
//!   it, so it needs no format of its own: an older delayq skips it and delivers the
//!   message as it stands.
//!
//! * 4 and 5, when the message was sent and first delivered (unix ms, 8 bytes each; 0 not
//!   yet), on a queue that retains final records
//!   ([`Setting::RetainCompleted`](crate::Setting::RetainCompleted)): the send script (or the
//!   batch path, `send.rs`) writes the first, the message's first claim the second, and
//!   the scripts' retention helpers keep both in its final record. An older delayq skips them.
//!
//! * 6, the W3C `traceparent` the message was sent with (`trace_context.rs`): 55 ASCII
//!   bytes, handed back with each delivery. No script reads it, and a delayq of format 2
//!   or later skips it (its deliveries carry no trace context), so it needs no format of
//!   its own: only the extension area's ([`EXTENSION_FORMAT`]).
//!
//! * 7, the payload is sealed (data format 7, [`ENCRYPTION_FORMAT`]; `sealing.rs`, where a
//!   sealed payload names its key): one byte, 1 (AES-256-GCM as `sealing.rs` lays it out). An older delayq would hand the sealed bytes over as the
//!   payload, so a sealed message is written only to a partition of format 7 or later, and
//!   the send script refuses a payload that is not sealed on a queue that encrypts.
//!
//! [`OnDuplicate::Debounce`]: crate::OnDuplicate::Debounce

/// The tag of a message's group.
pub(crate) const TAG_GROUP: u8 = 1;

/// The tag of a message's deadline.
pub(crate) const TAG_DEADLINE: u8 = 2;

/// The tag of a debounced message's latest due time.
pub(crate) const TAG_DEBOUNCE: u8 = 3;

/// The tags of when a message was sent and first delivered (a queue that retains).
pub(crate) const TAG_SENT: u8 = 4;
pub(crate) const TAG_FIRST: u8 = 5;

/// The tag of the W3C `traceparent` a message was sent with.
pub(crate) const TAG_TRACE: u8 = 6;

/// The tag that marks a sealed payload, and its one value.
pub(crate) const TAG_KEY: u8 = 7;
pub(crate) const SEALED_V1: &[u8] = &[1];

/// The data format that brought payloads encrypted at rest
/// ([`Setting::Encryption`](crate::Setting::Encryption)): an older delayq would hand a
/// sealed payload over as it is stored.
pub const ENCRYPTION_FORMAT: u32 = 7;

/// The data format that brought the extension area itself: a record with any field in it
/// (a trace context, a debounce's cap) is unreadable to a delayq of format 1, so it is
/// written only to a partition stamped with this format or later.
pub const EXTENSION_FORMAT: u32 = 2;

/// The data format that brought deadlines ([`SendOptions::ttl`](crate::SendOptions::ttl)):
/// an older delayq would deliver a message after its deadline.
pub const EXPIRY_FORMAT: u32 = 4;

/// The data format that brought groups: a partition must be stamped with it (or later)
/// before a message with a group is written there, since an older delayq would deliver it
/// without its group's turn or limit.
pub const GROUPS_FORMAT: u32 = 3;

/// The fields of an extension area that this delayq reads.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Fields {
    pub(crate) group: Option<String>,
    /// Unix ms.
    pub(crate) deadline_ms: Option<u64>,
    pub(crate) traceparent: Option<String>,
    /// Whether the payload is sealed.
    pub(crate) sealed: bool,
}

/// The area (without its length prefix) holding `fields`, in tag order.
pub(crate) fn encode(fields: &[(u8, &[u8])]) -> Vec<u8> {
    let mut area = Vec::new();
    for (tag, value) in fields {
        area.push(*tag);
        put_varint(&mut area, value.len() as u64);
        area.extend_from_slice(value);
    }
    area
}

/// The fields this delayq knows in `area`; None when the area is malformed (a field runs
/// past its end, or a known field's value is not what its tag holds).
pub(crate) fn decode(area: &[u8]) -> Option<Fields> {
    let mut fields = Fields::default();
    let mut at = 0;
    while at < area.len() {
        let tag = area[at];
        at += 1;
        let len = usize::try_from(read_varint(area, &mut at)?).ok()?;
        let value = area.get(at..at.checked_add(len)?)?;
        at += len;
        if tag == TAG_GROUP {
            fields.group = Some(String::from_utf8(value.to_vec()).ok()?);
        } else if tag == TAG_DEADLINE {
            fields.deadline_ms = Some(u64::from_be_bytes(value.try_into().ok()?));
        } else if tag == TAG_TRACE {
            // Only context: one that is not text is dropped, never the message.
            fields.traceparent = String::from_utf8(value.to_vec()).ok();
        } else if tag == TAG_KEY {
            fields.sealed = true;
        }
    }
    Some(fields)
}

pub(crate) fn read_varint(rec: &[u8], at: &mut usize) -> Option<u64> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let b = *rec.get(*at)?;
        *at += 1;
        n |= u64::from(b & 0x7f) << shift;
        if b < 0x80 {
            return Some(n);
        }
    }
    None
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_fields_are_read_and_unknown_ones_skipped() {
        let area = encode(&[(TAG_GROUP, b"tenant-7"), (200, &[9; 300])]);
        let fields = decode(&area).expect("well formed");
        assert_eq!(fields.group.as_deref(), Some("tenant-7"));
        assert_eq!(decode(&encode(&[(200, b"x")])), Some(Fields::default()));
        assert_eq!(decode(&area[..area.len() - 1]), None, "a field cut short");
    }
}
