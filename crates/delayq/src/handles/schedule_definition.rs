//! A schedule's definition as it is stored (`dq:{q}:schedule:<name>`, schedules.rs), read
//! back: what a scheduler needs to fire it ([`Definition`]) and what a reader is told of it
//! ([`ScheduleInfo`]); and the rule for schedule names.

use std::time::Duration;

use crate::handles::queue_core::QueueCore;
use crate::handles::sealed;
use crate::values::error::{InvalidInput, Result};
use crate::values::names::QueueName;
use crate::values::options::PayloadKind;
use crate::values::record;
use crate::values::recurrence::{MissedTicks, Recurrence};
use crate::values::schedule_firing::Firing;

/// Longest schedule name.
pub const MAX_SCHEDULE_NAME_LEN: usize = crate::values::names::MAX_QUEUE_NAME_LEN;

/// How many next tick times [`ScheduleInfo::next_ticks_ms`] lists.
const NEXT_TICKS: usize = 5;

/// A recurring schedule as stored, with its next tick times.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScheduleInfo {
    /// Its name, unique within its queue.
    pub name: String,
    /// When it fires.
    pub recurrence: Recurrence,
    /// What a scheduler does with ticks missed while none was running.
    pub missed: MissedTicks,
    /// The payload of each message.
    pub payload: Vec<u8>,
    /// What the payload is.
    pub kind: PayloadKind,
    /// The priority of each message.
    pub priority: u8,
    /// Deliveries each message gets before it is dead-lettered.
    pub max_attempts: u16,
    /// How long a worker's handler may run on each message, if set.
    pub handler_timeout: Option<Duration>,
    /// When it was created or last changed, ms since the Unix epoch (server clock); no tick
    /// at or before this fires.
    pub created_ms: u64,
    /// The last tick sent as a message, if any.
    pub last_tick_ms: Option<u64>,
    /// The next few ticks after now (or after the last tick sent, if later); while it is
    /// paused, those it would fire once resumed.
    pub next_ticks_ms: Vec<u64>,
    /// Paused ([`Schedules::pause`]): no scheduler fires it until it is resumed.
    pub paused: bool,
    /// Its jitter and overlap ([`Schedules::put_with`]); `next_ticks_ms` are the ticks,
    /// before jitter.
    pub firing: Firing,
    /// Its payload is kept sealed (its queue encrypts): opened or not, and with which key.
    pub sealed: Option<crate::values::message::Sealed>,
}

/// A definition read back from Redis: what a scheduler needs to fire it.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    pub(crate) name: String,
    pub(crate) recurrence: Recurrence,
    pub(crate) missed: MissedTicks,
    pub(crate) created_ms: u64,
    pub(crate) priority: u8,
    /// The record body of its messages, without an id.
    pub(crate) body: Vec<u8>,
    /// Paused: schedulers fire none of its ticks.
    pub(crate) paused: bool,
    /// Its jitter and overlap.
    pub(crate) firing: Firing,
    /// Since when every tick sent is recorded (a backfill looks no further back); None for a
    /// schedule put by a delayq that kept no record, until it is put again.
    pub(crate) ticks_from: Option<u64>,
}

/// Schedule names follow the queue-name rule (1 to 64 of `A-Za-z0-9._-`), so that a tick's
/// caller id is a valid message id.
pub(crate) fn check_name(name: &str) -> Result<(), InvalidInput> {
    QueueName::new(name).map(drop).map_err(|_| {
        InvalidInput::Option(format!(
            "a schedule name is 1 to {MAX_SCHEDULE_NAME_LEN} of A-Za-z0-9._-, not {name:?}"
        ))
    })
}

pub(crate) fn parse_definition(name: &str, fields: Vec<(String, Vec<u8>)>) -> Result<Definition> {
    let bad =
        |what: &str| crate::values::error::Error::Protocol(format!("schedule {name}: {what}"));
    let mut map = std::collections::HashMap::new();
    for (field, value) in fields {
        map.insert(field, value);
    }
    let text = |field: &str| -> Result<String> {
        let value = map.get(field).ok_or_else(|| bad(&format!("no {field}")))?;
        String::from_utf8(value.clone()).map_err(|_| bad(&format!("{field} is not text")))
    };
    let number = |field: &str| -> Result<u64> {
        text(field)?
            .parse()
            .map_err(|_| bad(&format!("{field} is not a number")))
    };
    let recurrence = if map.contains_key("cron") {
        Recurrence::cron(&text("cron")?, &text("tz")?)
    } else {
        Recurrence::interval(
            Duration::from_millis(number("every_ms")?),
            number("anchor_ms")?,
        )
    }
    .map_err(|e| bad(&e.to_string()))?;
    let missed: MissedTicks = text("missed")?
        .parse()
        .map_err(|e: InvalidInput| bad(&e.to_string()))?;
    let priority = u8::try_from(number("priority")?).map_err(|_| bad("priority"))?;
    let created_ms = number("created_ms")?;
    let body = map.get("body").cloned().ok_or_else(|| bad("no body"))?;
    Ok(Definition {
        name: name.to_owned(),
        recurrence,
        missed,
        created_ms,
        priority,
        body,
        paused: map.get("paused").is_some_and(|v| v == b"1"),
        firing: Firing::from_fields(
            map.get("jitter_ms").map(Vec::as_slice),
            map.get("overlap").map(Vec::as_slice),
        )
        .map_err(|e| bad(&e))?,
        ticks_from: map
            .get("ticks_from")
            .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok()),
    })
}

pub(crate) fn info(
    core: &QueueCore,
    def: Definition,
    last_tick_ms: Option<u64>,
    now_ms: u64,
) -> Result<ScheduleInfo> {
    let mut rec = record::decode(record::with_sort_key(0, 0, &def.body))?;
    let sealed = rec.sealed.then(|| {
        let (payload, sealed) = sealed::open_for_reader(core, std::mem::take(&mut rec.payload));
        rec.payload = payload;
        sealed
    });
    let after = now_ms.max(last_tick_ms.unwrap_or(0)).max(def.created_ms);
    Ok(ScheduleInfo {
        next_ticks_ms: def.recurrence.upcoming(after, NEXT_TICKS),
        name: def.name,
        recurrence: def.recurrence,
        missed: def.missed,
        payload: rec.payload,
        kind: rec.kind,
        priority: def.priority,
        max_attempts: rec.max_attempts,
        handler_timeout: rec.handler_timeout,
        created_ms: def.created_ms,
        last_tick_ms,
        paused: def.paused,
        firing: def.firing,
        sealed,
    })
}
