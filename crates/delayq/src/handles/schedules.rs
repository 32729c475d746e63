//! Recurring schedules: their definitions in Redis, shared by every client and scheduler, and
//! the send of one tick.
//!
//! A schedule belongs to a queue and lives under the queue's own hash tag (its partition 0's
//! slot):
//! * `dq:{q}:schedule:<name>`, HASH: the definition: `cron` and `tz`, or `every_ms` and
//!   `anchor_ms`; `missed` (`skip`, `once`, `all:<n>`); `created_ms`; `priority`; and `body`,
//!   the record body (`record.rs`) of its messages without an id, which holds the payload and
//!   the send options;
//! * `dq:{q}:schedules`, SET: the queue's schedule names;
//! * `dq:scheduled`, SET: the queues that have schedules, for schedulers that serve every
//!   queue (`scheduler.rs`). A queue stays listed after its last schedule goes: a stale entry
//!   costs a scheduler one look, while removing it could race a new schedule's creation.
//!
//! Each tick becomes one message with caller id `sched:<name>:<tick ms>`, due at the tick.
//! The partition that id belongs to keeps the last tick it was sent for the schedule, in its
//! control hash (`tick:<name>`), and `send.lua` refuses any tick no later than that: however
//! many schedulers send a tick, and whenever, one message comes of it.

use std::time::Duration;

use redis::Value;

use crate::handles::queue_core::{invocation, QueueCore};
use crate::handles::sealed;
use crate::store::keys::Keys;
use crate::store::partitions::join_all;
use crate::store::scripts::SCRIPTS;
use crate::values::error::{InvalidInput, Result};
use crate::values::message::Sent;
use crate::values::options::{Schedule, SendOptions};
use crate::values::record;
use crate::values::recurrence::{MissedTicks, Recurrence};
use crate::values::reply::Reply;
use crate::values::schedule_firing::{tick_jitter, Firing, DEFAULT_LEAD};
use crate::values::state::State;

use crate::handles::schedule_definition::{
    check_name, info, parse_definition, Definition, ScheduleInfo,
};

/// Most ticks sent ahead that a delete looks for (a scheduler sends one ahead unless its
/// lead is longer than the schedule's period).
const MAX_AHEAD: usize = 1000;

/// The caller id of tick `tick_ms` of schedule `name`.
pub fn tick_id(name: &str, tick_ms: u64) -> String {
    format!("sched:{name}:{tick_ms}")
}

/// The recurring schedules of one queue.
pub struct Schedules<'a> {
    pub(crate) queue: &'a QueueCore,
}

impl<'a> Schedules<'a> {
    pub(crate) fn new(queue: &'a QueueCore) -> Self {
        Schedules { queue }
    }

    /// Creates schedule `name`, or replaces its definition. Each tick of `recurrence` then
    /// becomes one message with `payload`, due at the tick, with caller id
    /// `sched:<name>:<tick ms>` and the priority, attempts, backoff, kind and handler
    /// timeout of `options` (which must not set an id, a delay or replicas). Ticks up to now
    /// never fire, nor any already sent: a replaced schedule goes on from its last tick, and
    /// a tick a scheduler sent ahead (it sends a little early, so that the message is due on
    /// time) keeps the definition it was sent with. Schedulers see the change within their
    /// refresh interval ([`Scheduler`](crate::Scheduler)).
    pub async fn put(
        &self,
        name: &str,
        recurrence: Recurrence,
        missed: MissedTicks,
        payload: impl AsRef<[u8]>,
        options: &SendOptions,
    ) -> Result<()> {
        self.put_with(
            name,
            recurrence,
            missed,
            Firing::default(),
            payload,
            options,
        )
        .await
    }

    /// As [`put`](Self::put), and how its ticks fire: with a jitter, and whether a tick
    /// fires while the last one's message is still pending or in flight ([`Firing`]).
    pub async fn put_with(
        &self,
        name: &str,
        recurrence: Recurrence,
        missed: MissedTicks,
        firing: Firing,
        payload: impl AsRef<[u8]>,
        options: &SendOptions,
    ) -> Result<()> {
        check_name(name)?;
        firing.check()?;
        if options.id.is_some() || options.replicas.is_some() {
            return Err(InvalidInput::Option(
                "a schedule's messages take their ids from their ticks, and cannot wait for \
                 replicas: give neither"
                    .into(),
            )
            .into());
        }
        if options.schedule != Schedule::Now {
            return Err(InvalidInput::Schedule(
                "a schedule's messages are due at their ticks: give no delay".into(),
            )
            .into());
        }
        if let MissedTicks::All { max: 0 } = missed {
            return Err(
                InvalidInput::Option("run all missed ticks up to at least 1".into()).into(),
            );
        }
        let (_, body) = crate::handles::send::prepare(self.queue, payload.as_ref(), options)?;
        // The layout fixes the partition count, as a send would.
        let layout = self.queue.layout().await?;
        // On a queue that encrypts, the payload kept in the definition is sealed too.
        let body = sealed::sealed_body(self.queue, layout.part(0), body).await?;
        let mut conn = self.queue.connection();
        check_jitter_fits(&mut conn, layout.part(0), &firing).await?;
        let created_ms = server_ms(&mut conn).await?;
        let key = Keys::schedule(self.queue.name(), name);
        let mut fields: Vec<(&str, Vec<u8>)> = Vec::new();
        match (recurrence.as_cron(), recurrence.as_interval()) {
            (Some((expr, tz)), _) => {
                fields.push(("cron", expr.into()));
                fields.push(("tz", tz.into()));
            }
            (None, Some((every, anchor_ms))) => {
                fields.push(("every_ms", every.as_millis().to_string().into()));
                fields.push(("anchor_ms", anchor_ms.to_string().into()));
            }
            (None, None) => {
                return Err(crate::values::error::Error::Protocol(
                    "a recurrence of no kind".into(),
                ));
            }
        }
        fields.push(("missed", missed.to_string().into()));
        fields.push(("created_ms", created_ms.to_string().into()));
        fields.push(("priority", options.priority.to_string().into()));
        fields.push(("body", body));
        fields.extend(firing.fields());
        // A paused schedule stays paused when it is put again; the record of its sent ticks
        // (for backfills) goes on from when it began.
        let (paused, ticks_from): (Option<String>, Option<String>) = redis::cmd("HMGET")
            .arg(&key)
            .arg("paused")
            .arg("ticks_from")
            .query_async(&mut conn)
            .await?;
        if paused.as_deref() == Some("1") {
            fields.push(("paused", b"1".to_vec()));
        }
        let ticks_from = ticks_from.unwrap_or_else(|| created_ms.to_string());
        fields.push(("ticks_from", ticks_from.into_bytes()));
        // The definition holds a record body, which is this partition's data format's.
        let layout = self.queue.layout().await?;
        self.queue.admit(layout.part(0)).await?;
        let slot = crate::store::keys::slot(self.queue.name().as_str());
        let mut write = redis::pipe();
        write
            .atomic()
            .del(&key)
            .hset_multiple(&key, &fields)
            .sadd(Keys::schedule_names(self.queue.name()), name);
        conn.transaction_at(slot, &write).await?;
        // A schedule of this name deleted before left tombstones (see `delete`): this one
        // starts afresh. (A delete racing this put may lose its tombstone to it; the last of
        // the two to finish decides whether the schedule exists.)
        let field = tick_field(name);
        for keys in layout.parts() {
            let tick: Option<u64> = redis::cmd("HGET")
                .arg(keys.control())
                .arg(&field)
                .query_async(&mut conn)
                .await?;
            if tick == Some(DELETED_TICK) {
                let _: i64 = redis::cmd("HDEL")
                    .arg(keys.control())
                    .arg(&field)
                    .query_async(&mut conn)
                    .await?;
            }
        }
        let _: i64 = redis::cmd("SADD")
            .arg(Keys::SCHEDULED_QUEUES)
            .arg(self.queue.name().as_str())
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Schedule `name`, or `None`.
    pub async fn get(&self, name: &str) -> Result<Option<ScheduleInfo>> {
        check_name(name)?;
        let Some(def) = self.definition(name).await? else {
            return Ok(None);
        };
        let mut conn = self.queue.connection();
        let now_ms = server_ms(&mut conn).await?;
        let last = self.last_tick(name).await?;
        Ok(Some(info(self.queue, def, last, now_ms)?))
    }

    /// Every schedule of the queue, by name.
    pub async fn list(&self) -> Result<Vec<ScheduleInfo>> {
        let mut out = Vec::new();
        let mut conn = self.queue.connection();
        let now_ms = server_ms(&mut conn).await?;
        for def in self.definitions().await? {
            let last = self.last_tick(&def.name).await?;
            out.push(info(self.queue, def, last, now_ms)?);
        }
        Ok(out)
    }

    /// Deletes schedule `name`; false if there was none. It never fires again, whatever
    /// the schedulers still hold of it; a tick a scheduler sent ahead and that is not yet due
    /// is cancelled with it; messages of ticks already due are left to be delivered.
    pub async fn delete(&self, name: &str) -> Result<bool> {
        check_name(name)?;
        let mut conn = self.queue.connection();
        let key = Keys::schedule(self.queue.name(), name);
        let exists: bool = redis::cmd("EXISTS")
            .arg(&key)
            .query_async(&mut conn)
            .await?;
        if !exists {
            return Ok(false);
        }
        let def = self.definition(name).await.ok().flatten();
        // First every partition's tick guard becomes a tombstone, read and replaced in one
        // step: from then on send.lua refuses every tick of the schedule, from schedulers
        // that have not reloaded their definitions too, and the last tick sent is known.
        let layout = self.queue.known_layout().await?;
        let field = tick_field(name);
        let mut last: Option<u64> = None;
        for keys in layout.parts() {
            let mut swap = redis::pipe();
            swap.atomic()
                .hget(keys.control(), &field)
                .hset(keys.control(), &field, DELETED_TICK);
            let replies = conn.transaction_at(keys.slot(), &swap).await?;
            let old: Option<u64> = match replies.first() {
                Some(v) => redis::from_redis_value_ref(v).map_err(redis::RedisError::from)?,
                None => None,
            };
            last = last.max(old.filter(|t| *t != DELETED_TICK));
        }
        // The record of its sent ticks (send.lua) goes with it.
        for keys in layout.parts() {
            let mut drop_record = redis::pipe();
            drop_record
                .atomic()
                .del(keys.schedule_ticks(name))
                .hdel(keys.control(), format!("ticks_trimmed:{name}"));
            conn.transaction_at(keys.slot(), &drop_record).await?;
        }
        let slot = crate::store::keys::slot(self.queue.name().as_str());
        let mut remove = redis::pipe();
        remove
            .atomic()
            .del(&key)
            .srem(Keys::schedule_names(self.queue.name()), name);
        let replies = conn.transaction_at(slot, &remove).await?;
        let deleted = matches!(replies.first(), Some(Value::Int(n)) if *n > 0);
        let now_ms = server_ms(&mut conn).await?;
        // Ticks sent ahead lie between now and the last tick sent.
        if let (Some(def), Some(last)) = (def, last) {
            for tick in def.recurrence.upcoming(now_ms, MAX_AHEAD) {
                if tick > last {
                    break;
                }
                crate::handles::by_id::cancel(self.queue, &tick_id(name, tick)).await?;
            }
        }
        Ok(deleted)
    }

    /// Pauses schedule `name`: schedulers fire none of its ticks until it is resumed (each
    /// sees the change within its refresh interval; a tick already sent ahead is a message
    /// like any other). False when there is no such schedule.
    pub async fn pause(&self, name: &str) -> Result<bool> {
        self.set_paused(name, true).await
    }

    /// Resumes schedule `name`. The ticks it skipped while paused count as missed: its
    /// [`MissedTicks`] policy says which of them fire now. False when there is no such
    /// schedule.
    pub async fn resume(&self, name: &str) -> Result<bool> {
        self.set_paused(name, false).await
    }

    async fn set_paused(&self, name: &str, paused: bool) -> Result<bool> {
        check_name(name)?;
        let key = Keys::schedule(self.queue.name(), name);
        let mut conn = self.queue.connection();
        let found: i64 = SCRIPTS
            .schedule_pause
            .key(&key)
            .arg(if paused { "1" } else { "" })
            .invoke_async(&mut conn)
            .await?;
        Ok(found == 1)
    }

    /// Every definition of the queue, by name; one that cannot be read is logged and left
    /// out, so that one bad entry stops no other schedule.
    pub(crate) async fn definitions(&self) -> Result<Vec<Definition>> {
        let mut conn = self.queue.connection();
        let mut names: Vec<String> = redis::cmd("SMEMBERS")
            .arg(Keys::schedule_names(self.queue.name()))
            .query_async(&mut conn)
            .await?;
        names.sort();
        let reads = names.iter().map(|name| self.definition(name));
        let mut out = Vec::with_capacity(names.len());
        for (def, name) in join_all(reads).await.into_iter().zip(&names) {
            match def {
                Ok(Some(def)) => out.push(def),
                Ok(None) => {}
                Err(crate::values::error::Error::Protocol(e)) => {
                    tracing::warn!(queue = %self.queue.name(), schedule = %name, "unreadable schedule: {e}");
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    pub(crate) async fn definition(&self, name: &str) -> Result<Option<Definition>> {
        let mut conn = self.queue.connection();
        let fields: Vec<(String, Vec<u8>)> = redis::cmd("HGETALL")
            .arg(Keys::schedule(self.queue.name(), name))
            .query_async(&mut conn)
            .await?;
        if fields.is_empty() {
            return Ok(None);
        }
        parse_definition(name, fields).map(Some)
    }

    /// The last tick of schedule `name` sent as a message: the latest any partition holds.
    pub(crate) async fn last_tick(&self, name: &str) -> Result<Option<u64>> {
        let layout = self.queue.known_layout().await?;
        let field = tick_field(name);
        let reads = layout.parts().iter().map(|keys| {
            let mut conn = self.queue.connection();
            let field = &field;
            async move {
                let tick: Option<u64> = redis::cmd("HGET")
                    .arg(keys.control())
                    .arg(field)
                    .query_async(&mut conn)
                    .await?;
                Ok::<_, crate::values::error::Error>(tick)
            }
        });
        let mut last = None;
        for tick in join_all(reads).await {
            last = last.max(tick?);
        }
        Ok(last)
    }

    /// Whether the message of the last tick sent of schedule `name` is still pending or in
    /// flight (an overlap to skip, [`Overlap::Skip`]).
    pub(crate) async fn last_tick_running(&self, name: &str) -> Result<bool> {
        let Some(last) = self.last_tick(name).await? else {
            return Ok(false);
        };
        let info = crate::handles::by_id::get(self.queue, &tick_id(name, last)).await?;
        Ok(
            info.is_some_and(|m| {
                matches!(m.state, State::Delayed | State::Ready | State::InFlight)
            }),
        )
    }

    /// Sends tick `tick_ms` of `def` as its message, due at the tick (plus its jitter),
    /// unless that tick (or a later one) was sent already. True when this call sent it.
    pub(crate) async fn send_tick(&self, def: &Definition, tick_ms: u64) -> Result<bool> {
        self.send_guarded(def, tick_ms, tick_field(&def.name)).await
    }

    /// Sends missed tick `tick_ms` of `def`, unless it was ever sent (`send.lua` keeps the
    /// record). True when this call sent it.
    pub(crate) async fn send_missed_tick(&self, def: &Definition, tick_ms: u64) -> Result<bool> {
        self.send_guarded(def, tick_ms, format!("backfill:{}", def.name))
            .await
    }

    async fn send_guarded(&self, def: &Definition, tick_ms: u64, guard: String) -> Result<bool> {
        let id = tick_id(&def.name, tick_ms);
        let due_ms = tick_ms
            + def
                .firing
                .jitter
                .map_or(0, |j| tick_jitter(&def.name, tick_ms, j).as_millis() as u64);
        let body = record::body_with_id(&def.body, &id).ok_or_else(|| {
            crate::values::error::Error::Protocol(format!(
                "schedule {}: its message body is malformed",
                def.name
            ))
        })?;
        let layout = self.queue.layout().await?;
        let k = layout.for_caller_id(&id);
        // Defined before its queue began to encrypt: its tick is sealed as it goes.
        let body = sealed::sealed_body(self.queue, layout.part(k), body).await?;
        let mut inv = invocation(layout.part(k), &SCRIPTS.send);
        inv.arg(layout.count())
            .arg(k)
            .arg(guard)
            .arg(tick_ms)
            .arg(&id)
            .arg(format!("@{due_ms}"))
            .arg(def.priority)
            .arg(body);
        let reply = self.queue.invoke(&inv).await.map_err(|e| {
            e.refused_schedule("delayq: over the max delay: ", "over the queue's max delay")
        })?;
        let mut r = Reply::new(reply)?;
        let (_now, _first) = (r.uint()?, r.uint()?);
        let sent = r.remaining() == 0;
        if sent {
            crate::handles::send::count_sent(
                self.queue,
                &[Sent {
                    id,
                    due_ms: Some(due_ms),
                    duplicate: false,
                    replaced: None,
                }],
            );
        }
        Ok(sent)
    }
}

/// Refuses a jitter that reaches past the queue's max delay, less the scheduler's default
/// lead (a tick is sent that long before it is due): its ticks would be refused by the
/// queue.
async fn check_jitter_fits(
    conn: &mut crate::store::connection::Conn,
    keys: &Keys,
    firing: &Firing,
) -> Result<()> {
    let Some(jitter) = firing.jitter else {
        return Ok(());
    };
    let max_delay_ms: Option<u64> = redis::cmd("HGET")
        .arg(keys.control())
        .arg("max_delay_ms")
        .query_async(conn)
        .await?;
    let reach = jitter + DEFAULT_LEAD;
    match max_delay_ms.map(Duration::from_millis) {
        Some(max_delay) if reach > max_delay => Err(InvalidInput::Schedule(format!(
            "a jitter of {jitter:?} (and the scheduler's lead of {:?}) reaches past the \
             queue's max delay of {max_delay:?}: its ticks would be refused",
            DEFAULT_LEAD
        ))
        .into()),
        _ => Ok(()),
    }
}

/// The tick guard of a deleted schedule: later than any tick (the year 287,396, exact in
/// Lua's numbers), so send.lua refuses every tick of it.
const DELETED_TICK: u64 = 1 << 53;

/// The control field in which a partition keeps the last tick of schedule `name` it was sent.
fn tick_field(name: &str) -> String {
    format!("tick:{name}")
}

/// The Redis server's clock, in ms: the clock every scheduler goes by.
pub(crate) async fn server_ms(conn: &mut crate::store::connection::Conn) -> Result<u64> {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query_async(conn).await?;
    Ok(secs * 1000 + micros / 1000)
}
