//! How an event is kept in a partition's stream, and read back (`events.lua` writes them):
//! stream ids and positions in a stream, the entries of a range reply, and the events of an
//! entry: one, or many packed into one (the sends, deliveries and acks of one script call).

use redis::Value;

use crate::values::error::{Error, Result};
use crate::values::event::{Event, EventKind, StreamId};
use crate::values::record;

/// A stream entry: its id and its fields (name, value).
pub(crate) type Entry = (StreamId, Vec<(String, Vec<u8>)>);

/// A stream range reply as entries.
pub(crate) fn entries(reply: Value) -> Result<Vec<Entry>> {
    let bad = |what: &str| Error::Protocol(format!("event stream: {what}"));
    let Value::Array(items) = reply else {
        return Err(bad("not a list of entries"));
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Value::Array(mut pair) = item else {
            return Err(bad("an entry is not a pair"));
        };
        let (Some(fields), Some(id)) = (pair.pop(), pair.pop()) else {
            return Err(bad("an entry is not a pair"));
        };
        let id: String = redis::from_redis_value(id).map_err(|_| bad("an id is not text"))?;
        let id = StreamId::parse(&id).ok_or_else(|| bad("an id is not <ms>-<seq>"))?;
        let flat: Vec<Vec<u8>> =
            redis::from_redis_value(fields).map_err(|_| bad("fields are not strings"))?;
        let fields = flat
            .chunks_exact(2)
            .map(|pair| {
                (
                    String::from_utf8_lossy(&pair[0]).into_owned(),
                    pair[1].clone(),
                )
            })
            .collect();
        out.push((id, fields));
    }
    Ok(out)
}

/// The events of one entry, in order, each placed nowhere yet (an empty cursor).
pub(crate) fn events_of((id, fields): Entry) -> Vec<Event> {
    let mut kind = EventKind::Other(String::new());
    let mut one = Event::placeholder();
    one.at_ms = id.0;
    let mut packed = None;
    for (name, value) in fields {
        let text = || String::from_utf8_lossy(&value).into_owned();
        match name.as_str() {
            "k" => kind = EventKind::from_stream(&text()),
            "id" => one.id = text(),
            "n" => one.attempt = text().parse().ok(),
            "due" => one.due_ms = text().parse().ok(),
            "err" => one.error = Some(text()),
            "x" => one.detail = Some(text()),
            "m" => packed = Some(value),
            _ => {}
        }
    }
    one.kind = kind;
    match packed {
        None => vec![one],
        Some(bytes) => unpack(&one, &bytes),
    }
}

/// The messages of a packed entry (`events.lua`): attempts, sort key, caller id each. What
/// does not parse ends the list: the events before it stand.
fn unpack(template: &Event, bytes: &[u8]) -> Vec<Event> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(head) = bytes.get(at..at + 16) {
        let attempts = u32::from(u16::from_be_bytes([head[0], head[1]]));
        let due_us = head[2..9].iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        let seq = head[9..15].iter().fold(0u64, |n, b| n << 8 | u64::from(*b));
        let len = usize::from(head[15]);
        let Some(id) = bytes.get(at + 16..at + 16 + len) else {
            break;
        };
        at += 16 + len;
        let mut event = template.clone();
        event.id = match len {
            0 => record::generated_id(due_us, seq),
            _ => String::from_utf8_lossy(id).into_owned(),
        };
        match template.kind {
            EventKind::Sent => event.due_ms = Some(due_us / 1000),
            _ => event.attempt = Some(attempts),
        }
        out.push(event);
    }
    out
}

/// Most events of one packed entry (`events.lua`'s PACK_MAX).
pub(crate) const PACK_MAX: usize = 100;

/// The bytes of one packed message with a generated id.
pub(crate) const PACKED_LEN: usize = 16;

/// One message of a packed `sent` entry, as `events.lua`'s `event_packed` writes it (the
/// batch path without ids writes its events from here).
pub(crate) fn pack_sent(out: &mut Vec<u8>, due_us: u64, seq: u64) {
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&due_us.to_be_bytes()[1..]);
    out.extend_from_slice(&seq.to_be_bytes()[2..]);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_packed_entry_unpacks_to_its_messages() {
        let mut m = Vec::new();
        pack_sent(&mut m, 1_795_000_000_000_123, 42);
        m.extend_from_slice(&[0, 3, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 7, 2]);
        m.extend_from_slice(b"ab");
        let fields = vec![("k".into(), b"sent".to_vec()), ("m".into(), m)];
        let events = events_of((StreamId(5, 0), fields));
        let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
        assert_eq!(ids, ["1795000000000123-42", "ab"]);
        assert_eq!(events[0].due_ms, Some(1_795_000_000_000));
        assert!(events
            .iter()
            .all(|e| e.at_ms == 5 && e.kind == EventKind::Sent));
    }
}
