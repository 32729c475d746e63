//! One message by its id: look it up, cancel it, or move its due time. The id names the
//! message's partition (`partitions.rs`), so each is one script call there.

use crate::store::scripts::QueueScript;

use crate::handles::queue_core::{invocation, Call, QueueCore};
use crate::handles::sealed;
use crate::values::error::{Error, Result};
use crate::values::error_history;
use crate::values::message::{CancelOutcome, MessageInfo};
use crate::values::names::check_lookup_id;
use crate::values::options::Schedule;
use crate::values::record;
use crate::values::reply::{parse_state, Reply};
use crate::values::state::State;

use crate::store::scripts::SCRIPTS;

/// The partition that holds the message `id`, with its keys: an invocation of `script`
/// there.
async fn by_id<'s>(core: &QueueCore, id: &str, script: &'s QueueScript) -> Result<Call<'s>> {
    check_lookup_id(id)?;
    let layout = core.known_layout().await?;
    let mut inv = invocation(layout.part(layout.for_id(id)), script);
    inv.arg(id);
    Ok(inv)
}

/// [`Queue::cancel`](crate::Queue::cancel).
pub(crate) async fn cancel(core: &QueueCore, id: &str) -> Result<CancelOutcome> {
    let inv = by_id(core, id, &SCRIPTS.cancel).await?;
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let state = parse_state(&r.string()?)?;
    let cancelled = r.int()? == 1;
    Ok(match (state, cancelled) {
        (None, _) => CancelOutcome::NotFound,
        (Some(s), true) => {
            core.metrics().cancelled.increment(1);
            CancelOutcome::Cancelled(s)
        }
        (Some(s), false) => CancelOutcome::NotCancelled(s),
    })
}

/// [`Queue::reschedule`](crate::Queue::reschedule).
pub(crate) async fn reschedule(core: &QueueCore, id: &str, schedule: Schedule) -> Result<u64> {
    let spec = schedule.to_spec()?;
    let mut inv = by_id(core, id, &SCRIPTS.reschedule).await?;
    inv.arg(spec.arg());
    let reply = core.invoke(&inv).await.map_err(|e| {
        e.refused_schedule("delayq: over the max delay: ", "over the queue's max delay")
            .refused_schedule(
                "delayq: past its deadline: ",
                "past the message's deadline (it would expire unrun)",
            )
    })?;
    let mut r = Reply::new(reply)?;
    let state = parse_state(&r.string()?)?;
    let due = r.int()?;
    match state {
        None => Err(Error::NotFound { id: id.to_owned() }),
        Some(state) if due < 0 => Err(Error::WrongState {
            id: id.to_owned(),
            state,
        }),
        Some(_) => Ok(due as u64),
    }
}

/// [`Queue::get`](crate::Queue::get).
pub(crate) async fn get(core: &QueueCore, id: &str) -> Result<Option<MessageInfo>> {
    let inv = by_id(core, id, &SCRIPTS.get).await?;
    let mut r = Reply::new(core.invoke(&inv).await?)?;
    let Some(state) = parse_state(&r.string()?)? else {
        return Ok(None);
    };
    if state == State::Completed {
        return read_final(id.to_owned(), &r.bytes()?).map(Some);
    }
    let mut info = read_message(&mut r, id.to_owned(), state)?;
    info.traceparent = r
        .opt_bytes()?
        .map(|t| String::from_utf8_lossy(&t).into_owned());
    if r.uint()? == 1 {
        let (payload, sealed) = sealed::open_for_reader(core, std::mem::take(&mut info.payload));
        (info.payload_len, info.payload, info.sealed) = (payload.len(), payload, Some(sealed));
    }
    Ok(Some(info))
}

/// A final record (`retention.lua`) as what `get` and `list` tell of message `id`: it keeps
/// no payload, priority or group.
pub(crate) fn read_final(id: String, record: &[u8]) -> Result<MessageInfo> {
    let fin = crate::values::retention::decode(record)?;
    let (last_error, errors) = error_history::read(fin.errors);
    Ok(MessageInfo {
        id,
        state: State::Completed,
        due_ms: fin.due_ms,
        attempts: fin.attempts,
        max_attempts: fin.max_attempts,
        last_error,
        errors,
        payload: Vec::new(),
        payload_len: 0,
        kind: crate::values::options::PayloadKind::Bytes,
        priority: crate::values::options::DEFAULT_PRIORITY,
        group: None,
        expires_at_ms: None,
        debounce_until_ms: None,
        lease_deadline_ms: None,
        died_at_ms: None,
        traceparent: None,
        completion: Some(fin.completion),
        sealed: None,
    })
}

/// A message as `get.lua` and `browse.lua` return it, from its due time on: due ms,
/// attempts, max attempts, error history, payload, lease deadline or died-at ms, flags byte,
/// priority, group, deadline (0: none), a debounce's latest due time (0: none).
pub(crate) fn read_message(r: &mut Reply, id: String, state: State) -> Result<MessageInfo> {
    let due_ms = r.uint()?;
    let attempts = r.uint()? as u32;
    let max_attempts = r.uint()? as u32;
    let (last_error, errors) = error_history::read(r.opt_bytes()?);
    let payload = r.bytes()?;
    let extra = r.uint()?;
    let kind = record::kind_of(r.uint()? as u8);
    let priority = r.uint()? as u8;
    let group = r
        .opt_bytes()?
        .map(|g| String::from_utf8_lossy(&g).into_owned());
    let expires_at_ms = Some(r.uint()?).filter(|ms| *ms > 0);
    let debounce_until_ms = Some(r.uint()?).filter(|ms| *ms > 0);
    Ok(MessageInfo {
        priority,
        group,
        expires_at_ms,
        debounce_until_ms,
        id,
        state,
        due_ms,
        attempts,
        max_attempts,
        last_error,
        errors,
        payload_len: payload.len(),
        payload,
        kind,
        lease_deadline_ms: (state == State::InFlight).then_some(extra),
        died_at_ms: (state == State::Dead).then_some(extra),
        traceparent: None,
        completion: None,
        sealed: None,
    })
}
