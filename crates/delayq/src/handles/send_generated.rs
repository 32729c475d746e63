//! A batch without caller ids, priorities, groups or deadlines, sent without Lua: its
//! messages need no duplicate check, and Lua's string handling was most of a send's cost.
//! Split from `send.rs`, which decides when this path is taken.

use std::collections::BTreeMap;

use redis::Value;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::store::keys::Keys;
use crate::store::partitions::Layout;
use crate::store::scripts::SCRIPTS;
use crate::values::buckets;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::extension::{TAG_FIRST, TAG_SENT};
use crate::values::message::Sent;
use crate::values::options::DueSpec;
use crate::values::record;
use crate::values::reply::Reply;

/// A batch without caller ids (of the default priority) needs no duplicate check, so it skips Lua, whose string
/// handling was most of a send's cost: one transaction reserves sequence numbers and reads
/// the server's clock, a second adds every record (built here, byte for byte as
/// `send.lua` would) and wakes a consumer. Nothing is visible before the second lands,
/// and it lands whole.
pub(crate) async fn send_generated<'p>(
    core: &QueueCore,
    layout: &Layout,
    k: usize,
    prepared: impl ExactSizeIterator<Item = &'p (DueSpec, Vec<u8>)>,
    sealed: bool,
) -> Result<Vec<Sent>> {
    let keys = layout.part(k);
    let format = core.admit(keys).await?;
    let count = prepared.len() as u64;
    let stride = layout.count() as u64;
    let mut conn = core.connection();
    let mut reserve = redis::pipe();
    reserve.atomic();
    if stride > 1 {
        // As send.lua does: sequence numbers of partition k are k modulo P.
        reserve.cmd("SET").arg(keys.seq()).arg(k).arg("NX");
    }
    reserve
        .incr(keys.seq(), count * stride)
        .cmd("TIME")
        .cmd("HMGET")
        .arg(keys.control())
        .arg("max_delay_ms")
        .arg("retain_ms")
        .arg("events")
        .arg("bucket_horizon_ms")
        .arg("encrypt");
    let mut replies = conn.transaction_at(keys.slot(), &reserve).await?;
    // As send.lua does: a message due further out than the queue's max delay is refused, and
    // nothing is written (the sequence numbers reserved are skipped, as a failed send's are);
    // on a queue that retains, each message notes when it was sent.
    let settings: Vec<Option<String>> = match replies.pop() {
        Some(v) => redis::from_redis_value(v).unwrap_or_default(),
        None => Vec::new(),
    };
    let max_delay_ms: Option<u64> = settings.first().and_then(|ms| ms.as_deref()?.parse().ok());
    let retains = settings.get(1).is_some_and(Option::is_some);
    // As events.lua does: each message sent is an event, on a queue that records them.
    let events_cap = settings.get(2).cloned().flatten();
    // As send.lua does: on a queue that encrypts, a payload that is not sealed is refused.
    if !sealed
        && settings
            .get(4)
            .is_some_and(|on| on.as_deref().is_some_and(|v| !v.is_empty()))
    {
        return Err(crate::handles::sealed::changed(core));
    }
    let horizon_ms = settings
        .get(3)
        .and_then(|ms| ms.as_deref()?.parse().ok())
        .unwrap_or(buckets::HORIZON_MS);
    let time = replies.pop();
    let last_seq = replies.pop();
    let (Some(Value::Int(last_seq)), Some(Value::Array(time))) = (last_seq, time) else {
        return Err(Error::Protocol(
            "sequence reservation: unexpected replies".into(),
        ));
    };
    let clock: Vec<u64> = time
        .iter()
        .filter_map(|v| redis::from_redis_value_ref::<u64>(v).ok())
        .collect();
    let [secs, micros] = clock[..] else {
        return Err(Error::Protocol(format!("TIME returned {time:?}")));
    };
    if last_seq as u64 >= record::LEVEL {
        // As send.lua does: the bits above LEVEL are the priority's.
        return Err(Error::Protocol(
            "this queue has used up its sequence numbers".into(),
        ));
    }
    let first_seq = last_seq as u64 - count * stride;
    let now_us = secs * 1_000_000 + micros;
    let prepared: Vec<_> = prepared.collect();
    if let Some(max_ms) = max_delay_ms {
        let furthest = prepared
            .iter()
            .map(|(spec, _)| spec.due_us(now_us).saturating_sub(now_us) / 1000)
            .max()
            .unwrap_or(0);
        if furthest > max_ms {
            return Err(InvalidInput::Schedule(format!(
                "over the queue's max delay: due {furthest} ms from now, at most {max_ms} ms"
            ))
            .into());
        }
    }
    let mut records = Vec::with_capacity(count as usize);
    let mut sent = Vec::with_capacity(count as usize);
    // The records due far enough ahead for a bucket, by bucket (buckets.rs).
    let mut far: BTreeMap<u64, Vec<Vec<u8>>> = BTreeMap::new();
    let mut packed = Vec::new();
    let mut record_to = |bucket: Option<u64>, rec: Vec<u8>| match bucket {
        Some(start) => far.entry(start).or_default().push(rec),
        None => records.push(rec),
    };
    for ((spec, body), i) in prepared.into_iter().zip(1..) {
        let seq = first_seq + i * stride;
        let due_us = spec.due_us(now_us);
        let bucket = buckets::far_enough(format, horizon_ms, due_us, now_us)
            .then(|| buckets::bucket_start(due_us))
            .filter(|&start| !core.full_buckets().contains(k, start));
        if events_cap.is_some() {
            crate::handles::event_entries::pack_sent(&mut packed, due_us, seq);
        }
        if retains {
            // As retention.lua's new_fields: sent now, first delivered not yet.
            let sent = (now_us / 1000).to_be_bytes();
            let fields = [(TAG_SENT, &sent[..]), (TAG_FIRST, &[0u8; 8][..])];
            let body = record::with_extension(body, &fields);
            record_to(bucket, record::with_sort_key(due_us, seq, &body));
        } else {
            record_to(bucket, record::with_sort_key(due_us, seq, body));
        }
        sent.push(Sent {
            id: record::generated_id(due_us, seq),
            due_ms: Some(due_us / 1000),
            duplicate: false,
            replaced: None,
        });
    }
    if !far.is_empty() {
        // Some go to buckets: one script call, with them grouped by bucket (add_records.lua).
        let mut inv = invocation(keys, &SCRIPTS.add_records);
        inv.arg(records.len());
        for rec in &records {
            inv.arg(rec.as_slice());
        }
        for (start, recs) in &far {
            inv.arg(start).arg(recs.len());
            for rec in recs {
                inv.arg(rec.as_slice());
            }
        }
        let mut reply = Reply::new(core.invoke(&inv).await?)?;
        reply.uint()?;
        let mut full = Vec::with_capacity(reply.remaining());
        while reply.remaining() > 0 {
            full.push(reply.uint()?);
        }
        core.full_buckets().note(k, &full, now_us / 1000);
        return Ok(sent);
    }
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(keys.pending());
    for rec in &records {
        zadd.arg("0").arg(rec.as_slice());
    }
    let mut add = redis::pipe();
    // As add_history() in prelude.lua does, by the server's clock read above.
    let minute = keys.history(now_us / 60_000_000);
    add.atomic()
        .add_command(zadd)
        .cmd("HINCRBY")
        .arg(&minute)
        .arg("s")
        .arg(count)
        .cmd("EXPIRE")
        .arg(&minute)
        .arg(Keys::HISTORY_TTL_SECS)
        // As wake() in prelude.lua does.
        .cmd("SPUBLISH")
        .arg(keys.wake())
        .arg(1);
    if let Some(cap) = events_cap {
        // As events.lua's event_packed and flush_events: an entry per PACK_MAX messages.
        let stream = keys.events();
        for pack in packed.chunks(
            crate::handles::event_entries::PACKED_LEN * crate::handles::event_entries::PACK_MAX,
        ) {
            add.cmd("XADD")
                .arg(&stream)
                .arg("MAXLEN")
                .arg("~")
                .arg(&cap)
                .arg("*")
                .arg("k")
                .arg("sent")
                .arg("m")
                .arg(pack);
        }
        add.cmd("SPUBLISH").arg(&stream).arg(1);
    }
    conn.transaction_at(keys.slot(), &add).await?;
    Ok(sent)
}
