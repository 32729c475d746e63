//! Producing: sending one message or a batch. On a queue of one partition a send is one
//! script call (`send.lua`), atomic on the Redis side; the one exception is a batch without
//! caller ids (see `send_generated`). On a queue of several partitions (`partitions.rs`) a
//! message's partition follows from its group or its caller id, or goes round robin; a
//! batch is split by partition, one call each, atomic per partition. On a queue that
//! encrypts, payloads are sealed before their records are made (`sealed.rs`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::Value;

use crate::handles::queue_core::{invocation, Call, QueueCore};
use crate::handles::sealed;
use crate::store::keys::Keys;
use crate::store::partitions::{self, join_all, Layout};
use crate::store::scripts::SCRIPTS;
use crate::telemetry::spans::OpSpan;
use crate::values::error::{Error, InvalidInput, Result};
use crate::values::extension::EXTENSION_FORMAT;
use crate::values::message::Sent;
use crate::values::names::{check_caller_id, check_group};
use crate::values::options::{
    check_count, checked_ms, DueSpec, Message, Replicas, SendOptions, MAX_PRIORITY,
    MAX_REPLICA_WAIT,
};
use crate::values::record;
use crate::values::reply::Reply;
use crate::values::sealing::Keyring;
use crate::values::send_fields;
use crate::values::state::State;

/// Most payload bytes in one batch send: one script call that large would hold up Redis (and
/// every other client) while it copies the batch.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// [`Queue::send`](crate::Queue::send).
pub(crate) async fn send(core: &QueueCore, payload: &[u8], options: &SendOptions) -> Result<Sent> {
    let mut span = OpSpan::send(core.name().as_str(), 1, options.traceparent.as_deref());
    let result = once_more_if_unsealed(core, || send_one(core, payload, options, &span)).await;
    if let Ok(sent) = &result {
        span.message_id(&sent.id);
    }
    span.end(&result);
    result
}

async fn send_one(
    core: &QueueCore,
    payload: &[u8],
    options: &SendOptions,
    span: &OpSpan,
) -> Result<Sent> {
    let mut prepared = prepare(core, payload, options)?;
    let layout = core.layout().await?;
    let k = partition_of(&layout, options)?;
    let sealing;
    let (options, payload) = match sealed::keys_for_send(core, &[layout.part(k)]).await? {
        Some(keys) => {
            sealing = sealed::seal(core, &keys, payload, options)?;
            prepared.1 = record::encode_body(&sealing.0, &sealing.1);
            (&sealing.0, &sealing.1[..])
        }
        None => (options, payload),
    };
    check_format(core, layout.part(k), [options]).await?;
    let carrying;
    let options = match carried_trace(core, &[layout.part(k)], span, options).await {
        Some(traceparent) => {
            carrying = options.clone().traceparent(traceparent);
            // Checked already; only the record changes.
            prepared.1 = record::encode_body(&carrying, payload);
            &carrying
        }
        None => options,
    };
    let value = match options.replicas {
        None => {
            let mut inv = invocation(layout.part(k), &SCRIPTS.send);
            send_args(&mut inv, &layout, k, [(options, &prepared)]);
            core.invoke(&inv).await.map_err(refused_by_send)?
        }
        Some(replicas) => {
            let mut call = invocation(layout.part(k), &SCRIPTS.send);
            send_args(&mut call, &layout, k, [(options, &prepared)]);
            send_and_wait(core, layout.part(k), &call, replicas)
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
    let span = OpSpan::send(core.name().as_str(), messages.len(), None);
    let result = once_more_if_unsealed(core, || send_many(core, messages, &span)).await;
    span.end(&result);
    result
}

async fn send_many(core: &QueueCore, messages: &[Message], span: &OpSpan) -> Result<Vec<Sent>> {
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
    let parts: Vec<&Arc<Keys>> = groups.iter().map(|(k, _)| layout.part(*k)).collect();
    let sealing;
    let messages = match sealed::keys_for_send(core, &parts).await? {
        Some(keys) => {
            sealing = seal_all(core, &keys, messages, &mut prepared)?;
            &sealing[..]
        }
        None => messages,
    };
    for (k, positions) in &groups {
        let options = positions.iter().map(|&i| &messages[i].options);
        check_format(core, layout.part(*k), options).await?;
    }
    if let Some(traceparent) = carried_trace(core, &parts, span, &SendOptions::new()).await {
        for (m, prepared) in messages.iter().zip(&mut prepared) {
            if m.options.traceparent.is_none() {
                let carrying = m.options.clone().traceparent(traceparent.clone());
                // Checked already; only the record changes.
                prepared.1 = record::encode_body(&carrying, &m.payload);
            }
        }
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

/// `messages` sealed with the newest of `keys`, their record bodies in `prepared` made
/// again to match.
fn seal_all(
    core: &QueueCore,
    keys: &Keyring,
    messages: &[Message],
    prepared: &mut [(DueSpec, Vec<u8>)],
) -> Result<Vec<Message>> {
    let mut out = Vec::with_capacity(messages.len());
    for (m, prepared) in messages.iter().zip(prepared) {
        let (options, payload) = sealed::seal(core, keys, &m.payload, &m.options)?;
        prepared.1 = record::encode_body(&options, &payload);
        out.push(Message { payload, options });
    }
    Ok(out)
}

/// Runs `send`, and once more when it was refused as unsealed: the queue began to encrypt
/// since this client read its settings, and nothing was written. The settings are read
/// again first; a second such refusal is [`Error::EncryptionChanged`].
async fn once_more_if_unsealed<T, Fut>(core: &QueueCore, send: impl Fn() -> Fut) -> Result<T>
where
    Fut: std::future::Future<Output = Result<T>>,
{
    match send().await {
        Err(e) if sealed::refused_unsealed(&e) => {
            sealed::forget(core).await?;
            match send().await {
                Err(e) if sealed::refused_unsealed(&e) => Err(sealed::changed(core)),
                result => result,
            }
        }
        result => result,
    }
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
        let mut call = invocation(layout.part(k), &SCRIPTS.send);
        send_args(&mut call, layout, k, items);
        let value = send_and_wait(core, layout.part(k), &call, replicas)
            .await
            .map_err(refused_by_send)?;
        let specs: Vec<_> = positions
            .iter()
            .map(|&i| (&messages[i].options, prepared[i].0))
            .collect();
        return parse_sent(value, &specs, layout.count());
    }
    if positions
        .iter()
        .all(|&i| send_fields::may_skip_script(&messages[i].options))
    {
        let bodies = positions.iter().map(|&i| &prepared[i]);
        let sealed = positions.iter().all(|&i| messages[i].options.sealed);
        return crate::handles::send_generated::send_generated(core, layout, k, bodies, sealed)
            .await;
    }
    let mut inv = invocation(layout.part(k), &SCRIPTS.send);
    let items = positions
        .iter()
        .map(|&i| (&messages[i].options, &prepared[i]));
    send_args(&mut inv, layout, k, items);
    let specs: Vec<_> = positions
        .iter()
        .map(|&i| (&messages[i].options, prepared[i].0))
        .collect();
    let value = core.invoke(&inv).await.map_err(refused_by_send)?;
    parse_sent(value, &specs, layout.count())
}

/// With tracing on, the trace a message sent without a `traceparent` carries: its send
/// span's, so that its handler's span is a child of it. `None` when the message has its own,
/// tracing is off, or a partition it goes to is of a data format that cannot carry it
/// (tracing never makes a send fail).
pub(crate) async fn carried_trace(
    core: &QueueCore,
    partitions: &[&Arc<Keys>],
    span: &OpSpan,
    options: &SendOptions,
) -> Option<String> {
    if options.traceparent.is_some() {
        return None;
    }
    let traceparent = span.traceparent()?;
    for keys in partitions.iter() {
        match core.admit_at_least(keys, EXTENSION_FORMAT).await {
            Ok(format) if format >= EXTENSION_FORMAT => {}
            _ => return None,
        }
    }
    Some(traceparent)
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

/// Runs `send` (`send.lua`, by `FCALL` or `EVALSHA`: script_call.rs) and `WAIT` for
/// `replicas` in one pipeline on the connection to partition `keys`' master, so the `WAIT`
/// covers the send. A master that lacks the function or script (a restart that kept nothing)
/// gets it and the pipeline is repeated: the call that failed wrote nothing. `WAIT` blocks
/// its connection until it returns, so these go over a connection of the client's own: they
/// queue behind each other, never in front of other traffic.
async fn send_and_wait(
    core: &QueueCore,
    keys: &Keys,
    send: &Call<'_>,
    replicas: Replicas,
) -> Result<Value> {
    let timeout_ms = checked_ms(replicas.timeout, "replica timeout")?;
    core.admit(keys).await?;
    let mut conn = core.durable_connection().await?;
    let scripting = core.scripting();
    let mut loaded = false;
    loop {
        let functions = scripting.functions();
        let mut pipe = redis::pipe();
        pipe.add_command(send.command(functions))
            .cmd("WAIT")
            .arg(replicas.count)
            .arg(timeout_ms);
        let (mut values, failed) = match conn.query_pipeline_at(keys.slot(), &pipe).await {
            // A pipeline reports a command's error as its reply, or (a cluster's) as an error
            // that lists them.
            Ok(values) => {
                let failed = match values.first() {
                    Some(Value::ServerError(e)) => Some(redis::RedisError::from(e.clone())),
                    _ => None,
                };
                (values, failed)
            }
            Err(e) => match first_failed(&e) {
                Some(failed) => (Vec::new(), Some(failed)),
                None => return Err(e.into()),
            },
        };
        if let Some(e) = failed {
            scripting
                .recover(&mut conn, send, functions, e, &mut loaded)
                .await?;
            continue;
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

/// Refuses messages that need a newer data format than partition `keys` has
/// (`values/send_fields.rs` says what each field needs: a group, format 3, since an older
/// delayq would deliver it without its group's turn or limit; a deadline, 4; trace context,
/// 2, since a delayq of format 1 cannot read a record with an extension area).
async fn check_format<'o>(
    core: &QueueCore,
    keys: &Keys,
    messages: impl IntoIterator<Item = &'o SendOptions>,
) -> Result<()> {
    let needed = messages
        .into_iter()
        .filter_map(|options| send_fields::format_needed(&send_fields::fields_of(options)))
        .max_by_key(|(format, _)| *format);
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
        crate::values::trace_context::check_traceparent(traceparent)?;
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
        expiry.check(due.due_us(crate::values::options::now_ms() * 1000) / 1000)?;
    }
    options.on_duplicate.check(options.id.is_some())?;
    if let Some(timeout) = options.handler_timeout {
        crate::values::options::check_handler_timeout(timeout)?;
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

/// The error of the pipeline's first command, if a failed pipeline `e` names one.
fn first_failed(e: &redis::RedisError) -> Option<redis::RedisError> {
    let errors = e.clone().into_server_errors()?;
    let (_, first) = errors.iter().find(|(index, _)| *index == 0)?;
    Some(first.clone().into())
}

/// `send.lua`'s arguments for partition `k` (P and k: it numbers messages k modulo P), then
/// each message's caller id (or ''), due time (and after a '/' its deadline, after a ';'
/// its upsert), priority and record body.
fn send_args<'m>(
    args: &mut Call<'_>,
    layout: &Layout,
    k: usize,
    items: impl IntoIterator<Item = (&'m SendOptions, &'m (DueSpec, Vec<u8>))>,
) {
    args.arg(layout.count());
    args.arg(k);
    // No tick guard (scheduler.rs sends with one).
    args.arg("");
    args.arg("");
    for (options, (due, body)) in items {
        args.arg(options.id.as_deref().unwrap_or(""));
        let mut spec = due.arg();
        if let Some(expiry) = options.expiry {
            spec = format!("{spec}/{}", expiry.arg());
        }
        if let Some(upsert) = options.on_duplicate.arg(options.if_in_flight) {
            spec = format!("{spec};{upsert}");
        }
        args.arg(spec);
        args.arg(options.priority);
        args.arg(body.as_slice());
    }
}
