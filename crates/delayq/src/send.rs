//! Producing: sending one message or a batch. On a queue of one partition a send is one
//! script call (`send.lua`), atomic on the Redis side; the one exception is a batch without
//! caller ids (see `send_generated`). On a queue of several partitions (`partitions.rs`) a
//! message's partition follows from its group or its caller id, or goes round robin; a
//! batch is split by partition, one call each, atomic per partition.

use std::collections::HashMap;
use std::time::Duration;

use redis::{ScriptInvocation, Value};

use crate::error::{Error, InvalidInput, Result};
use crate::extension::{EXPIRY_FORMAT, EXTENSION_FORMAT, GROUPS_FORMAT, TAG_FIRST, TAG_SENT};
use crate::keys::Keys;
use crate::message::Sent;
use crate::names::{check_caller_id, check_group};
use crate::options::{
    check_count, checked_ms, DueSpec, Message, Replicas, SendOptions, DEFAULT_PRIORITY,
    MAX_PRIORITY, MAX_REPLICA_WAIT,
};
use crate::partitions::{self, join_all, Layout};
use crate::queue_core::{invocation, QueueCore};
use crate::record;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::state::State;

/// Most payload bytes in one batch send: one script call that large would hold up Redis (and
/// every other client) while it copies the batch.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// [`Queue::send`](crate::Queue::send).
pub(crate) async fn send(core: &QueueCore, payload: &[u8], options: &SendOptions) -> Result<Sent> {
    let prepared = prepare(core, payload, options)?;
    let layout = core.layout().await?;
    let k = partition_of(&layout, options)?;
    check_format(core, layout.part(k), [options]).await?;
    let value = match options.replicas {
        None => {
            let mut inv = invocation(layout.part(k), &SCRIPTS.send);
            send_args(&mut *inv, &layout, k, [(options, &prepared)]);
            core.invoke(&inv).await.map_err(refused_by_send)?
        }
        Some(replicas) => {
            let cmd = replicated_send(&layout, k, [(options, &prepared)]);
            send_and_wait(core, layout.part(k), cmd, replicas)
                .await
                .map_err(refused_by_send)?
        }
    };
    let mut sent = parse_sent(value, &[(options, prepared.0)], layout.count())?;
    count_sent(core, &sent);
    sent.pop()
        .ok_or_else(|| Error::Protocol("send returned nothing".into()))
}

/// [`Queue::send_batch`](crate::Queue::send_batch).
/// Sends each partition's share in one call, all at once.
pub(crate) async fn send_batch(core: &QueueCore, messages: &[Message]) -> Result<Vec<Sent>> {
    check_count("a batch", messages.len())?;
    let bytes: usize = messages.iter().map(|m| m.payload.len()).sum();
    if bytes > MAX_BATCH_BYTES {
        return Err(InvalidInput::Option(format!(
            "a batch holds at most {MAX_BATCH_BYTES} payload bytes, not {bytes}"
        ))
        .into());
    }
    let mut prepared = Vec::with_capacity(messages.len());
    for m in messages {
        prepared.push(prepare(core, &m.payload, &m.options)?);
    }
    let layout = core.layout().await?;
    for m in messages {
        partition_of(&layout, &m.options)?;
    }
    let groups = partitions::group(layout.count(), messages, |m| {
        partition_of(&layout, &m.options).unwrap_or(0)
    });
    for (k, positions) in &groups {
        let options = positions.iter().map(|&i| &messages[i].options);
        check_format(core, layout.part(*k), options).await?;
    }
    let calls = groups
        .iter()
        .map(|(k, positions)| send_group(core, &layout, *k, positions, messages, &prepared));
    let mut out: Vec<Option<Sent>> = vec![None; messages.len()];
    for (result, (_, positions)) in join_all(calls).await.into_iter().zip(&groups) {
        for (sent, &i) in result?.into_iter().zip(positions) {
            out[i] = Some(sent);
        }
    }
    let sent: Vec<Sent> = out.into_iter().flatten().collect();
    if sent.len() != messages.len() {
        return Err(Error::Protocol(
            "a batch send returned too few results".into(),
        ));
    }
    count_sent(core, &sent);
    Ok(sent)
}

/// Sends the messages at `positions` to partition `k`, in one call.
async fn send_group(
    core: &QueueCore,
    layout: &Layout,
    k: usize,
    positions: &[usize],
    messages: &[Message],
    prepared: &[(DueSpec, Vec<u8>)],
) -> Result<Vec<Sent>> {
    // The strictest durability any message asks for.
    let replicas = positions
        .iter()
        .filter_map(|&i| messages[i].options.replicas)
        .reduce(|a, b| Replicas {
            count: a.count.max(b.count),
            timeout: a.timeout.max(b.timeout),
        });
    if let Some(replicas) = replicas {
        let items = positions
            .iter()
            .map(|&i| (&messages[i].options, &prepared[i]));
        let cmd = replicated_send(layout, k, items);
        let value = send_and_wait(core, layout.part(k), cmd, replicas)
            .await
            .map_err(refused_by_send)?;
        let specs: Vec<_> = positions
            .iter()
            .map(|&i| (&messages[i].options, prepared[i].0))
            .collect();
        return parse_sent(value, &specs, layout.count());
    }
    let generated = |i: usize| {
        let options = &messages[i].options;
        options.id.is_none()
            && options.priority == DEFAULT_PRIORITY
            && options.group.is_none()
            && options.expiry.is_none()
    };
    if positions.iter().all(|&i| generated(i)) {
        let bodies = positions.iter().map(|&i| &prepared[i]);
        return send_generated(core, layout, k, bodies).await;
    }
    let mut inv = invocation(layout.part(k), &SCRIPTS.send);
    let items = positions
        .iter()
        .map(|&i| (&messages[i].options, &prepared[i]));
    send_args(&mut *inv, layout, k, items);
    let specs: Vec<_> = positions
        .iter()
        .map(|&i| (&messages[i].options, prepared[i].0))
        .collect();
    let value = core.invoke(&inv).await.map_err(refused_by_send)?;
    parse_sent(value, &specs, layout.count())
}

/// `send.lua`'s refusal of a message due further out than the queue's max delay, as the
/// bad input it is (nothing was written); any other error as it is.
fn refused_by_send(e: Error) -> Error {
    e.refused_schedule("delayq: over the max delay: ", "over the queue's max delay")
}

pub(crate) fn count_sent(core: &QueueCore, sent: &[Sent]) {
    let new = sent.iter().filter(|s| !s.duplicate).count();
    core.metrics().sent.increment(new as u64);
}

/// A batch without caller ids (of the default priority) needs no duplicate check, so it skips Lua, whose string
/// handling was most of a send's cost: one transaction reserves sequence numbers and reads
/// the server's clock, a second adds every record (built here, byte for byte as
/// `send.lua` would) and wakes a consumer. Nothing is visible before the second lands,
/// and it lands whole.
async fn send_generated<'p>(
    core: &QueueCore,
    layout: &Layout,
    k: usize,
    prepared: impl ExactSizeIterator<Item = &'p (DueSpec, Vec<u8>)>,
) -> Result<Vec<Sent>> {
    let keys = layout.part(k);
    core.admit(keys).await?;
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
        .arg("events");
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
    let mut zadd = redis::cmd("ZADD");
    zadd.arg(keys.pending());
    let mut sent = Vec::with_capacity(count as usize);
    let mut packed = Vec::new();
    for ((spec, body), i) in prepared.into_iter().zip(1..) {
        let seq = first_seq + i * stride;
        let due_us = spec.due_us(now_us);
        if events_cap.is_some() {
            crate::event_entries::pack_sent(&mut packed, due_us, seq);
        }
        if retains {
            // As retention.lua's new_fields: sent now, first delivered not yet.
            let sent = (now_us / 1000).to_be_bytes();
            let fields = [(TAG_SENT, &sent[..]), (TAG_FIRST, &[0u8; 8][..])];
            let body = record::with_extension(body, &fields);
            zadd.arg("0").arg(record::with_sort_key(due_us, seq, &body));
        } else {
            zadd.arg("0").arg(record::with_sort_key(due_us, seq, body));
        }
        sent.push(Sent {
            id: record::generated_id(due_us, seq),
            due_ms: Some(due_us / 1000),
            duplicate: false,
            replaced: None,
        });
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
        for pack in packed.chunks(crate::event_entries::PACKED_LEN * crate::event_entries::PACK_MAX)
        {
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

/// Runs `send` (an `EVALSHA` of `send.lua`) and `WAIT` for `replicas` in one pipeline on
/// the connection to partition `keys`' master, so the `WAIT` covers the send. A master
/// that lacks the script (a promoted replica) gets it and the pipeline is repeated: the
/// `EVALSHA` that failed wrote nothing. `WAIT` blocks its connection until it returns, so
/// these go over a connection of the client's own: they queue behind each other, never
/// in front of other traffic.
async fn send_and_wait(
    core: &QueueCore,
    keys: &Keys,
    send: redis::Cmd,
    replicas: Replicas,
) -> Result<Value> {
    let timeout_ms = checked_ms(replicas.timeout, "replica timeout")?;
    core.admit(keys).await?;
    let mut pipe = redis::pipe();
    pipe.add_command(send)
        .cmd("WAIT")
        .arg(replicas.count)
        .arg(timeout_ms);
    let mut conn = core.durable_connection().await?;
    let no_script = redis::ErrorKind::Server(redis::ServerErrorKind::NoScript);
    let mut loaded = false;
    loop {
        let mut values = match conn.query_pipeline_at(keys.slot(), &pipe).await {
            Err(e) if !loaded && e.kind() == no_script => Vec::new(),
            result => result?,
        };
        // A pipeline reports a command's error as its reply.
        let missing = values.is_empty()
            || matches!(values.first(), Some(Value::ServerError(e))
                if e.kind() == Some(redis::ServerErrorKind::NoScript));
        if missing && !loaded {
            SCRIPTS.send.prepare_invoke().load_async(&mut conn).await?;
            loaded = true;
            continue;
        }
        if let Some(Value::ServerError(e)) = values.first() {
            return Err(redis::RedisError::from(e.clone()).into());
        }
        let (Some(Value::Int(acked)), Some(sent), None) =
            (values.pop(), values.pop(), values.pop())
        else {
            return Err(Error::Protocol(
                "a send with WAIT: unexpected replies".into(),
            ));
        };
        let acked = u32::try_from(acked).unwrap_or(0);
        if acked < replicas.count {
            return Err(Error::NotReplicated {
                replicas: acked,
                wanted: replicas.count,
            });
        }
        return Ok(sent);
    }
}

/// The partition a message goes to: its group's (so that a group's order and limits are
/// one partition's), else its caller id's, else the next in turn.
fn partition_of(layout: &Layout, options: &SendOptions) -> Result<usize> {
    Ok(match (&options.group, &options.id) {
        (Some(_), Some(_)) if layout.count() > 1 => {
            // Its id would name one partition and its group another: lookups by the id
            // would look in the wrong one.
            return Err(InvalidInput::Option(
                "a message with both a caller id and a group needs a queue of one partition".into(),
            )
            .into());
        }
        (Some(group), _) => layout.for_caller_id(group),
        (None, Some(id)) => layout.for_caller_id(id),
        (None, None) => layout.next(),
    })
}

/// Refuses messages that need a newer data format than partition `keys` has: with a group
/// ([`GROUPS_FORMAT`]: an older delayq would deliver it without its group's turn or limit),
/// a deadline ([`EXPIRY_FORMAT`]: it would deliver it after its deadline) or trace context
/// ([`EXTENSION_FORMAT`]: a delayq of format 1 cannot read a record with an extension area).
async fn check_format<'o>(
    core: &QueueCore,
    keys: &Keys,
    messages: impl IntoIterator<Item = &'o SendOptions>,
) -> Result<()> {
    let mut needed: Option<(u32, &str)> = None;
    for options in messages {
        let this = if options.expiry.is_some() {
            Some((EXPIRY_FORMAT, "messages with a deadline"))
        } else if options.group.is_some() {
            Some((GROUPS_FORMAT, "messages with a group"))
        } else if options.traceparent.is_some() {
            Some((EXTENSION_FORMAT, "messages with trace context"))
        } else {
            None
        };
        if this.is_some_and(|(f, _)| needed.is_none_or(|(n, _)| f > n)) {
            needed = this;
        }
    }
    let Some((needed, feature)) = needed else {
        return Ok(());
    };
    let found = core.admit_at_least(keys, needed).await?;
    if found >= needed {
        return Ok(());
    }
    Err(Error::FormatTooOld {
        feature,
        found,
        needed,
    })
}

/// Validates a message and encodes its record body.
pub(crate) fn prepare(
    core: &QueueCore,
    payload: &[u8],
    options: &SendOptions,
) -> Result<(DueSpec, Vec<u8>)> {
    core.check_payload(payload)?;
    if let Some(id) = &options.id {
        check_caller_id(id)?;
    }
    if let Some(group) = &options.group {
        check_group(group)?;
    }
    if let Some(traceparent) = &options.traceparent {
        crate::trace_context::check_traceparent(traceparent)?;
    }
    if options.priority > MAX_PRIORITY {
        return Err(InvalidInput::Option(format!(
            "a priority is 0 to {}, not {}",
            MAX_PRIORITY, options.priority
        ))
        .into());
    }
    if options.max_attempts == 0 {
        return Err(InvalidInput::Option("max attempts must be at least 1".into()).into());
    }
    options.backoff.validate()?;
    let due = options.schedule.to_spec()?;
    if let Some(expiry) = options.expiry {
        expiry.check(due.due_us(crate::options::now_ms() * 1000) / 1000)?;
    }
    options.on_duplicate.check(options.id.is_some())?;
    if let Some(timeout) = options.handler_timeout {
        crate::options::check_handler_timeout(timeout)?;
    }
    if let Some(replicas) = options.replicas {
        let limit = MAX_REPLICA_WAIT;
        if replicas.timeout < Duration::from_millis(1) || replicas.timeout > limit {
            return Err(InvalidInput::Option(format!(
                "the wait for replicas is 1 ms to {limit:?}, not {:?}",
                replicas.timeout
            ))
            .into());
        }
    }
    let body = record::encode_body(options, payload);
    Ok((due, body))
}

/// Builds the send results from the script's reply: it reports the server time and the first
/// sequence number, from which due times and generated ids follow (numbers `stride`, the
/// partition count, apart), and the caller ids that existed: duplicates, and upserts that
/// took an existing message's place.
fn parse_sent(value: Value, sent: &[(&SendOptions, DueSpec)], stride: usize) -> Result<Vec<Sent>> {
    let mut r = Reply::new(value)?;
    let now_us = r.uint()?;
    let first_seq = r.uint()?;
    let mut existed = HashMap::new();
    while r.remaining() > 0 {
        let position = r.uint()?;
        existed.insert(position, (r.int()?, r.uint()?));
    }
    let mut out = Vec::with_capacity(sent.len());
    for (i, (options, spec)) in (1u64..).zip(sent) {
        let result = match (existed.get(&i), &options.id) {
            (Some(&(due, what)), Some(id)) => Sent {
                id: id.clone(),
                due_ms: u64::try_from(due).ok(),
                duplicate: what == 0,
                replaced: match what {
                    0 | 4 => None,
                    1 => Some(State::Delayed),
                    2 => Some(State::Ready),
                    3 => Some(State::InFlight),
                    _ => return Err(Error::Protocol(format!("send reported {what} for an id"))),
                },
            },
            (Some(_), None) => {
                return Err(Error::Protocol(
                    "a generated id reported as duplicate".into(),
                ))
            }
            (None, id) => {
                let due_us = spec.due_us(now_us);
                Sent {
                    id: id.clone().unwrap_or_else(|| {
                        let seq = first_seq + i * stride as u64;
                        record::generated_id(due_us, record::level_base(options.priority) + seq)
                    }),
                    due_ms: Some(due_us / 1000),
                    duplicate: false,
                    replaced: None,
                }
            }
        };
        out.push(result);
    }
    Ok(out)
}

/// `send.lua` on partition `k` as a plain `EVALSHA` command, to pipeline with `WAIT`.
fn replicated_send<'m>(
    layout: &Layout,
    k: usize,
    items: impl IntoIterator<Item = (&'m SendOptions, &'m (DueSpec, Vec<u8>))>,
) -> redis::Cmd {
    let keys = layout.part(k).all();
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(SCRIPTS.send.get_hash()).arg(keys.len()).arg(keys);
    send_args(&mut cmd, layout, k, items);
    cmd
}

/// Where `send.lua`'s arguments go: a script invocation, or an `EVALSHA` command.
trait ArgSink {
    fn push(&mut self, arg: impl redis::ToRedisArgs);
}

impl ArgSink for ScriptInvocation<'_> {
    fn push(&mut self, arg: impl redis::ToRedisArgs) {
        self.arg(arg);
    }
}

impl ArgSink for redis::Cmd {
    fn push(&mut self, arg: impl redis::ToRedisArgs) {
        self.arg(arg);
    }
}

/// `send.lua`'s arguments for partition `k` (P and k: it numbers messages k modulo P), then
/// each message's caller id (or ''), due time (and after a '/' its deadline, after a ';'
/// its upsert), priority and record body.
fn send_args<'m>(
    args: &mut impl ArgSink,
    layout: &Layout,
    k: usize,
    items: impl IntoIterator<Item = (&'m SendOptions, &'m (DueSpec, Vec<u8>))>,
) {
    args.push(layout.count());
    args.push(k);
    // No tick guard (scheduler.rs sends with one).
    args.push("");
    args.push("");
    for (options, (due, body)) in items {
        args.push(options.id.as_deref().unwrap_or(""));
        let mut spec = due.arg();
        if let Some(expiry) = options.expiry {
            spec = format!("{spec}/{}", expiry.arg());
        }
        if let Some(upsert) = options.on_duplicate.arg(options.if_in_flight) {
            spec = format!("{spec};{upsert}");
        }
        args.push(spec);
        args.push(options.priority);
        args.push(body.as_slice());
    }
}
