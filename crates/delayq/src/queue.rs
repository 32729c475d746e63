//! A handle on one queue: producing, inspecting and settling messages. Every method is one
//! script call (one round trip), atomic on the Redis side; the one exception is a batch send
//! without caller ids (see `send_generated`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{Script, ScriptInvocation, Value};
use tokio::time::Instant;

use crate::connection;
use crate::consumer::{Claim, Consumer, Delivery, ReceiveOptions};
use crate::dead_letters::DeadLetters;
use crate::error::{Error, InvalidInput, Result};
use crate::error_history;
use crate::keys::Keys;
use crate::message::{
    parse_state, Amend, CancelOutcome, DeadLettered, MessageInfo, NackOutcome, Next, Sent, State,
    Stats,
};
use crate::names::{check_caller_id, check_lookup_id, QueueName};
use crate::options::{checked_ms, Config, DueSpec, Message, Schedule, SendOptions};
use crate::receipt::{Held, Receipt};
use crate::record;
use crate::recording::QueueMetrics;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::wakeup::Subscriptions;

/// Most messages in one batch call (sends, claims, acks): keeps each script short, so one
/// call never holds up Redis for long.
pub const MAX_BATCH: usize = 1000;

/// Most payload bytes in one batch send: one script call that large would hold up Redis (and
/// every other client) while it copies the batch.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// Most expired leases one claim reclaims; the rest follow on the next call.
const RECLAIM_PER_CLAIM: usize = 100;

/// A handle on one queue. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Queue {
    name: QueueName,
    keys: Arc<Keys>,
    target: crate::client::Target,
    conn: connection::Ordinary,
    config: Arc<Config>,
    subscriptions: Arc<Subscriptions>,
    metrics: Arc<QueueMetrics>,
}

impl Queue {
    pub(crate) fn new(
        keys: Arc<Keys>,
        name: QueueName,
        target: crate::client::Target,
        conn: connection::Ordinary,
        config: Arc<Config>,
        subscriptions: Arc<Subscriptions>,
    ) -> Self {
        Queue {
            metrics: Arc::new(QueueMetrics::new(&name)),
            name,
            keys,
            target,
            conn,
            config,
            subscriptions,
        }
    }

    pub(crate) fn metrics(&self) -> &Arc<QueueMetrics> {
        &self.metrics
    }

    /// The queue's name.
    pub fn name(&self) -> &QueueName {
        &self.name
    }

    pub(crate) fn keys(&self) -> &Keys {
        &self.keys
    }

    /// The live wake-up subscription of this queue, shared with its other consumers.
    pub(crate) async fn subscription(&self) -> Result<Arc<crate::wakeup::Subscription>> {
        self.subscriptions
            .get(&self.target, &self.config, self.keys.wake())
            .await
    }

    pub(crate) fn connection(&self) -> connection::Conn {
        self.conn.get()
    }

    /// Sends one message.
    pub async fn send(&self, payload: impl AsRef<[u8]>, options: &SendOptions) -> Result<Sent> {
        let mut inv = self.invocation(&SCRIPTS.send);
        let spec = self.push_message(&mut inv, payload.as_ref(), options)?;
        let mut sent = parse_sent(self.invoke(&inv).await?, &[(options, spec)])?;
        self.count_sent(&sent);
        sent.pop()
            .ok_or_else(|| Error::Protocol("send returned nothing".into()))
    }

    /// Sends up to [`MAX_BATCH`] messages at once, atomically: if any message is invalid,
    /// nothing is written, and the batch becomes visible whole. One round trip, or two for a
    /// batch without caller ids (which is then several times cheaper for Redis). Results are
    /// in input order.
    pub async fn send_batch(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        check_batch(messages.len())?;
        let bytes: usize = messages.iter().map(|m| m.payload.len()).sum();
        if bytes > MAX_BATCH_BYTES {
            return Err(InvalidInput::Option(format!(
                "a batch holds at most {MAX_BATCH_BYTES} payload bytes, not {bytes}"
            ))
            .into());
        }
        // On a cluster the script takes every batch: redis-rs's cluster pipelines do not run
        // as one MULTI transaction, and the transaction path needs two that do.
        if messages.iter().all(|m| m.options.id.is_none()) && !self.conn.is_cluster() {
            return self.send_generated(messages).await;
        }
        let mut inv = self.invocation(&SCRIPTS.send);
        let mut specs = Vec::with_capacity(messages.len());
        for m in messages {
            specs.push((
                &m.options,
                self.push_message(&mut inv, &m.payload, &m.options)?,
            ));
        }
        let sent = parse_sent(self.invoke(&inv).await?, &specs)?;
        self.count_sent(&sent);
        Ok(sent)
    }

    fn count_sent(&self, sent: &[Sent]) {
        let new = sent.iter().filter(|s| !s.duplicate).count();
        self.metrics.sent.increment(new as u64);
    }

    /// A batch without caller ids needs no duplicate check, so it skips Lua, whose string
    /// handling was most of a send's cost: one transaction reserves sequence numbers and reads
    /// the server's clock, a second adds every record (built here, byte for byte as
    /// `send.lua` would) and wakes a consumer. Nothing is visible before the second lands,
    /// and it lands whole.
    async fn send_generated(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        let mut prepared = Vec::with_capacity(messages.len());
        for m in messages {
            prepared.push(self.prepare(&m.payload, &m.options)?);
        }
        let mut conn = self.conn.get();
        let (first_seq, (secs, micros)): (u64, (u64, u64)) = redis::pipe()
            .atomic()
            .incr(self.keys.seq(), messages.len())
            .cmd("TIME")
            .query_async(&mut conn)
            .await?;
        let first_seq = first_seq - messages.len() as u64;
        let now_us = secs * 1_000_000 + micros;
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(self.keys.pending());
        let mut sent = Vec::with_capacity(messages.len());
        for ((spec, body), seq) in prepared.into_iter().zip(first_seq + 1..) {
            let due_us = spec.due_us(now_us);
            zadd.arg("0").arg(record::with_sort_key(due_us, seq, &body));
            sent.push(Sent {
                id: record::generated_id(due_us, seq),
                due_ms: Some(due_us / 1000),
                duplicate: false,
            });
        }
        redis::pipe()
            .atomic()
            .add_command(zadd)
            .ignore()
            // As wake() in prelude.lua does.
            .cmd("SPUBLISH")
            .arg(self.keys.wake())
            .arg(1)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        self.metrics.sent.increment(sent.len() as u64);
        Ok(sent)
    }

    fn push_message(
        &self,
        inv: &mut ScriptInvocation<'_>,
        payload: &[u8],
        options: &SendOptions,
    ) -> Result<DueSpec> {
        let (due, body) = self.prepare(payload, options)?;
        inv.arg(options.id.as_deref().unwrap_or(""))
            .arg(due.arg())
            .arg(body);
        Ok(due)
    }

    /// Validates a message and encodes its record body.
    fn prepare(&self, payload: &[u8], options: &SendOptions) -> Result<(DueSpec, Vec<u8>)> {
        self.check_payload(payload)?;
        if let Some(id) = &options.id {
            check_caller_id(id)?;
        }
        if options.max_attempts == 0 {
            return Err(InvalidInput::Option("max attempts must be at least 1".into()).into());
        }
        options.backoff.validate()?;
        let due = options.schedule.to_spec()?;
        if let Some(timeout) = options.handler_timeout {
            crate::options::check_handler_timeout(timeout)?;
        }
        let body = record::encode_body(options, payload);
        Ok((due, body))
    }

    /// Removes a delayed or ready message. An in-flight or dead message is left alone and
    /// reported as such.
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome> {
        check_lookup_id(id)?;
        let mut inv = self.invocation(&SCRIPTS.cancel);
        inv.arg(id);
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let state = parse_state(&r.string()?)?;
        let cancelled = r.int()? == 1;
        Ok(match (state, cancelled) {
            (None, _) => CancelOutcome::NotFound,
            (Some(s), true) => {
                self.metrics.cancelled.increment(1);
                CancelOutcome::Cancelled(s)
            }
            (Some(s), false) => CancelOutcome::NotCancelled(s),
        })
    }

    /// Moves a delayed or ready message to a new due time, keeping its id. Returns the new due
    /// time (ms since the Unix epoch, server clock). An in-flight or dead message gives
    /// [`Error::WrongState`]; an unknown id [`Error::NotFound`].
    pub async fn reschedule(&self, id: &str, schedule: Schedule) -> Result<u64> {
        check_lookup_id(id)?;
        let mut inv = self.invocation(&SCRIPTS.reschedule);
        inv.arg(id).arg(schedule.to_spec()?.arg());
        let mut r = Reply::new(self.invoke(&inv).await?)?;
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

    /// What is known of a message, or `None` if there is no such message.
    pub async fn get(&self, id: &str) -> Result<Option<MessageInfo>> {
        check_lookup_id(id)?;
        let mut inv = self.invocation(&SCRIPTS.get);
        inv.arg(id);
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let Some(state) = parse_state(&r.string()?)? else {
            return Ok(None);
        };
        let due_ms = r.uint()?;
        let attempts = r.uint()? as u32;
        let max_attempts = r.uint()? as u32;
        let (last_error, errors) = error_history::read(r.opt_bytes()?);
        let payload = r.bytes()?;
        let extra = r.uint()?;
        let kind = record::kind_of(r.uint()? as u8);
        Ok(Some(MessageInfo {
            id: id.to_owned(),
            state,
            due_ms,
            attempts,
            max_attempts,
            last_error,
            errors,
            payload,
            kind,
            lease_deadline_ms: (state == State::InFlight).then_some(extra),
            died_at_ms: (state == State::Dead).then_some(extra),
        }))
    }

    /// Counts per state and the lag of the oldest ready message, in one atomic read.
    pub async fn stats(&self) -> Result<Stats> {
        let inv = self.invocation(&SCRIPTS.stats);
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        Ok(Stats {
            delayed: r.uint()?,
            ready: r.uint()?,
            in_flight: r.uint()?,
            dead: r.uint()?,
            oldest_ready_lag_ms: r.uint()?,
        })
    }

    /// A consumer of this queue. Consumers are cheap: those of one queue made from one
    /// [`DelayQ`](crate::DelayQ) share one connection for wake-ups.
    pub async fn consumer(&self) -> Result<Consumer> {
        Consumer::new(crate::queue_set::QueueSet::single(self.clone())).await
    }

    /// The dead letters of this queue.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters::new(self)
    }

    /// Claims up to `options.max` due messages (one script call, no waiting); with `repeat`,
    /// returns what the earlier claim with token base `base` took instead, if it ran
    /// (`claim.lua`). A record that cannot be decoded is moved to the dead letters and left
    /// out; the rest of the claim is delivered.
    pub(crate) async fn claim(
        &self,
        claim_record: &str,
        options: &ReceiveOptions,
        base: u64,
        repeat: bool,
    ) -> Result<Claim> {
        let lease_ms = checked_ms(options.lease, "lease")?;
        let mut inv = self.invocation(&SCRIPTS.claim);
        inv.key(claim_record)
            .arg(options.max)
            .arg(lease_ms)
            .arg(rand::random::<f64>())
            .arg(RECLAIM_PER_CLAIM)
            .arg(base)
            .arg(if repeat { "1" } else { "0" });
        // The lease began after this moment in Redis, so it ends no earlier than this + lease.
        let expires = Instant::now() + options.lease;
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let next_event_us = r.int()?;
        let lease_deadline_ms = r.uint()?;
        let mut token = r.uint()?;
        let now_us = r.uint()?;
        let reclaimed_retry = r.uint()?;
        let mut dead_lettered = Vec::new();
        let mut buried = r.array()?;
        while buried.remaining() > 0 {
            let (id, error) = (buried.string()?, buried.string()?);
            dead_lettered.push(self.dead_lettered(id, error));
        }
        let m = &self.metrics;
        let reclaimed_dead = dead_lettered.len() as u64;
        m.lease_expired.increment(reclaimed_retry + reclaimed_dead);
        m.retried.increment(reclaimed_retry);
        m.dead_lettered.increment(reclaimed_dead);
        let mut deliveries = Vec::with_capacity(r.remaining());
        let mut undecodable = Vec::new();
        while r.remaining() > 0 {
            token += 1;
            let Some(raw) = r.opt_bytes()? else {
                continue; // a repeated claim's message that is no longer held under it
            };
            let seq = record::seq_of(&raw);
            match record::decode(raw) {
                Ok(rec) => {
                    let late_us = now_us.saturating_sub(rec.due_us);
                    m.lateness.record(late_us as f64 / 1e6);
                    deliveries.push(Delivery {
                        queue: self.name.clone(),
                        id: rec.id,
                        payload: rec.payload,
                        // The record is as it was pending; this delivery is one more attempt.
                        attempt: u32::from(rec.attempts) + 1,
                        due_ms: rec.due_us / 1000,
                        lease_deadline_ms,
                        expires,
                        token,
                        seq: rec.seq,
                        explicit_id: rec.explicit_id,
                        kind: rec.kind,
                        handler_timeout: rec.handler_timeout,
                    })
                }
                Err(e) => undecodable.push((lease_member(seq, token), e.to_string())),
            }
        }
        m.delivered.increment(deliveries.len() as u64);
        if !undecodable.is_empty() {
            dead_lettered.extend(self.bury(&undecodable).await);
        }
        Ok(Claim {
            dead_lettered,
            deliveries,
            next_event: u64::try_from(next_event_us).ok().map(Duration::from_micros),
        })
    }

    /// Moves claimed messages whose record could not be decoded to the dead letters. A
    /// failure is only logged: the messages come back when their lease expires.
    async fn bury(&self, undecodable: &[([u8; 12], String)]) -> Vec<DeadLettered> {
        let mut inv = self.invocation(&SCRIPTS.bury);
        let errors: Vec<String> = undecodable
            .iter()
            .map(|(_, error)| format!("undecodable: {error}"))
            .collect();
        for ((member, _), error) in undecodable.iter().zip(&errors) {
            inv.arg(&member[..]).arg(error);
        }
        let mut buried = Vec::new();
        match self.invoke(&inv).await.and_then(Reply::new) {
            Ok(mut r) => {
                for error in errors {
                    if let Ok(Some(id)) = r.opt_string() {
                        tracing::error!(queue = %self.name, id = %id, "undecodable record moved to the dead letters");
                        buried.push(self.dead_lettered(id, error));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(queue = %self.name, error = %e, "could not move undecodable records to the dead letters; they return after their lease");
            }
        }
        buried
    }

    fn dead_lettered(&self, id: String, error: String) -> DeadLettered {
        DeadLettered {
            queue: self.name.clone(),
            id,
            error,
        }
    }

    /// Completes a delivery: the message is gone for good. A holder whose lease has passed
    /// gets [`Error::LeaseLost`] and changes nothing.
    pub async fn ack(&self, delivery: &Delivery) -> Result<()> {
        let acked = self.ack_many(std::slice::from_ref(delivery)).await?;
        lease_result(delivery, acked.first().copied().unwrap_or(false))
    }

    /// Completes many deliveries in one round trip; `true` per delivery that was acked,
    /// `false` where its lease was lost.
    pub async fn ack_many(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        self.ack_held(deliveries).await
    }

    /// [`ack_many`](Self::ack_many) by receipts.
    pub async fn ack_receipts(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        self.ack_held(receipts).await
    }

    async fn ack_held(&self, held: &[impl Held]) -> Result<Vec<bool>> {
        check_batch(held.len())?;
        let mut inv = self.invocation(&SCRIPTS.ack);
        for d in held {
            inv.arg(&d.lease_member()[..])
                .arg(d.id())
                .arg(if d.explicit_id() { "1" } else { "0" });
        }
        let acked = flags(self.invoke(&inv).await?)?;
        let n = acked.iter().filter(|a| **a).count();
        self.metrics.acked.increment(n as u64);
        Ok(acked)
    }

    /// Reports a failed delivery. The next attempt is scheduled after `retry_after`, or by
    /// the message's backoff policy when `None`; after the last attempt the message becomes
    /// a dead letter with `error` as its last error.
    pub async fn nack(
        &self,
        delivery: &Delivery,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<NackOutcome> {
        self.nack_held(delivery, error, retry_after).await
    }

    /// [`nack`](Self::nack) by receipt.
    pub async fn nack_receipt(
        &self,
        receipt: &Receipt,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<NackOutcome> {
        self.nack_held(receipt, error, retry_after).await
    }

    /// Reports a failed delivery and what should come next: another attempt by the backoff
    /// or after a given time (a dead letter after the last attempt either way), or a dead
    /// letter now.
    pub async fn fail(&self, delivery: &Delivery, error: &str, next: Next) -> Result<NackOutcome> {
        self.fail_held(delivery, error, next, &Amend::default())
            .await
    }

    /// [`fail`](Self::fail), changing the message for the attempts that follow (a new
    /// payload, more or fewer attempts) in the same atomic step.
    pub async fn fail_amended(
        &self,
        delivery: &Delivery,
        error: &str,
        next: Next,
        amend: &Amend,
    ) -> Result<NackOutcome> {
        self.fail_held(delivery, error, next, amend).await
    }

    /// [`fail_amended`](Self::fail_amended) by receipt.
    pub async fn fail_receipt(
        &self,
        receipt: &Receipt,
        error: &str,
        next: Next,
        amend: &Amend,
    ) -> Result<NackOutcome> {
        self.fail_held(receipt, error, next, amend).await
    }

    async fn nack_held(
        &self,
        held: &impl Held,
        error: &str,
        retry_after: Option<Duration>,
    ) -> Result<NackOutcome> {
        let next = retry_after.map_or(Next::Backoff, Next::After);
        self.fail_held(held, error, next, &Amend::default()).await
    }

    async fn fail_held(
        &self,
        held: &impl Held,
        error: &str,
        next: Next,
        amend: &Amend,
    ) -> Result<NackOutcome> {
        self.check_amend(amend)?;
        let mut inv = self.invocation(&SCRIPTS.nack);
        push_failure(&mut inv, held, error, next, amend)?;
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let outcome = r.string()?;
        self.count_failures([outcome.as_str()]);
        match outcome.as_str() {
            "retry" => Ok(NackOutcome::Retry),
            "dead" => Ok(NackOutcome::Dead),
            "lost" => Err(Error::LeaseLost {
                id: held.id().to_owned(),
            }),
            other => Err(Error::Protocol(format!("nack returned {other:?}"))),
        }
    }

    /// Reports many failed deliveries in one round trip, each with its error and what comes
    /// next; per delivery what became of it, `None` where its lease was lost.
    pub(crate) async fn fail_many(
        &self,
        deliveries: &[Delivery],
        failures: &[(String, Next, Amend)],
    ) -> Result<Vec<Option<NackOutcome>>> {
        check_batch(deliveries.len())?;
        let mut inv = self.invocation(&SCRIPTS.nack);
        for (d, (error, next, amend)) in deliveries.iter().zip(failures) {
            self.check_amend(amend)?;
            push_failure(&mut inv, d, error, *next, amend)?;
        }
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let mut outcomes = Vec::with_capacity(deliveries.len());
        while r.remaining() > 0 {
            outcomes.push(r.string()?);
        }
        self.count_failures(outcomes.iter().map(String::as_str));
        Ok(outcomes
            .iter()
            .map(|o| match o.as_str() {
                "retry" => Some(NackOutcome::Retry),
                "dead" => Some(NackOutcome::Dead),
                _ => None,
            })
            .collect())
    }

    /// A new payload is held to the same limit as a sent one.
    pub(crate) fn check_amend(&self, amend: &Amend) -> Result<()> {
        amend
            .payload
            .as_deref()
            .map_or(Ok(()), |p| self.check_payload(p))
    }

    fn check_payload(&self, payload: &[u8]) -> Result<()> {
        if payload.len() > self.config.max_payload_bytes {
            return Err(InvalidInput::PayloadTooLarge {
                size: payload.len(),
                limit: self.config.max_payload_bytes,
            }
            .into());
        }
        Ok(())
    }

    /// Counts nacks by what `nack.lua` made of them.
    fn count_failures<'a>(&self, outcomes: impl IntoIterator<Item = &'a str>) {
        let m = &self.metrics;
        for outcome in outcomes {
            match outcome {
                "retry" => m.retried.increment(1),
                "dead" => m.dead_lettered.increment(1),
                _ => continue,
            }
            m.nacked.increment(1);
        }
    }

    /// Hands deliveries back unprocessed: ready again at once, without counting the attempt
    /// (a worker shutting down uses this). `true` per delivery released, `false` where its
    /// lease was lost.
    pub async fn release(&self, deliveries: &[Delivery]) -> Result<Vec<bool>> {
        self.release_held(deliveries).await
    }

    /// [`release`](Self::release) by receipts.
    pub async fn release_receipts(&self, receipts: &[Receipt]) -> Result<Vec<bool>> {
        self.release_held(receipts).await
    }

    async fn release_held(&self, held: &[impl Held]) -> Result<Vec<bool>> {
        check_batch(held.len())?;
        let mut inv = self.invocation(&SCRIPTS.nack);
        for d in held {
            inv.arg(&d.lease_member()[..])
                .arg("r")
                .arg("")
                .arg("")
                .arg(0)
                .arg("")
                .arg("");
        }
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let mut out = Vec::with_capacity(held.len());
        while r.remaining() > 0 {
            out.push(r.string()? == "released");
        }
        Ok(out)
    }

    /// Extends a delivery's lease to `lease` from now; returns the new deadline (ms since the
    /// Unix epoch). A holder whose lease has passed gets [`Error::LeaseLost`].
    pub async fn extend(&self, delivery: &mut Delivery, lease: Duration) -> Result<u64> {
        let deadlines = self
            .extend_many(std::slice::from_mut(delivery), lease)
            .await?;
        match deadlines.first() {
            Some(Some(deadline)) => Ok(*deadline),
            _ => Err(Error::LeaseLost {
                id: delivery.id.clone(),
            }),
        }
    }

    /// Extends many leases in one round trip and updates each delivery's deadline; `None`
    /// per delivery whose lease was lost.
    pub async fn extend_many(
        &self,
        deliveries: &mut [Delivery],
        lease: Duration,
    ) -> Result<Vec<Option<u64>>> {
        let sent = Instant::now();
        let deadlines = self.extend_held(deliveries, lease).await?;
        for (d, deadline) in deliveries.iter_mut().zip(&deadlines) {
            if let Some(deadline) = deadline {
                d.lease_deadline_ms = *deadline;
                // The new lease began after `sent` in Redis.
                d.expires = sent + lease;
            }
        }
        Ok(deadlines)
    }

    /// [`extend_many`](Self::extend_many) by receipts: the new deadline (ms since the Unix
    /// epoch) per receipt, `None` where the lease was lost.
    pub async fn extend_receipts(
        &self,
        receipts: &[Receipt],
        lease: Duration,
    ) -> Result<Vec<Option<u64>>> {
        self.extend_held(receipts, lease).await
    }

    async fn extend_held(&self, held: &[impl Held], lease: Duration) -> Result<Vec<Option<u64>>> {
        check_batch(held.len())?;
        let lease_ms = checked_ms(lease, "lease")?;
        if lease_ms == 0 {
            return Err(InvalidInput::Option("a lease must be at least 1 ms".into()).into());
        }
        let mut inv = self.invocation(&SCRIPTS.extend);
        inv.arg(lease_ms);
        for d in held {
            inv.arg(&d.lease_member()[..]);
        }
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let mut out = Vec::with_capacity(held.len());
        while r.remaining() > 0 {
            let deadline = r.uint()?;
            out.push((deadline > 0).then_some(deadline));
        }
        Ok(out)
    }

    /// A script invocation with the queue's keys already in place.
    pub(crate) fn invocation<'a>(&self, script: &'a Script) -> ScriptInvocation<'a> {
        let mut inv = script.prepare_invoke();
        for key in self.keys.all() {
            inv.key(key);
        }
        inv
    }

    pub(crate) async fn invoke(&self, inv: &ScriptInvocation<'_>) -> Result<Value> {
        let mut conn = self.conn.get();
        Ok(inv.invoke_async(&mut conn).await?)
    }
}

/// The arguments `nack.lua` takes for one failed delivery.
fn push_failure(
    inv: &mut ScriptInvocation<'_>,
    held: &impl Held,
    error: &str,
    next: Next,
    amend: &Amend,
) -> Result<()> {
    let (mode, retry_ms) = match next {
        Next::Backoff => ("f", String::new()),
        Next::After(d) => ("f", checked_ms(d, "retry-after")?.to_string()),
        Next::Dead => ("d", String::new()),
    };
    inv.arg(&held.lease_member()[..])
        .arg(mode)
        .arg(error)
        .arg(retry_ms)
        .arg(rand::random::<f64>());
    match &amend.payload {
        Some(p) => inv.arg([b"=".as_slice(), p].concat()),
        None => inv.arg(""),
    };
    match amend.extra_attempts {
        0 => inv.arg(""),
        n => inv.arg(n),
    };
    Ok(())
}

fn check_batch(len: usize) -> Result<()> {
    Ok(check_count("a batch", len)?)
}

/// Every count that becomes one script call (batch, claim, page) is 1 to [`MAX_BATCH`].
pub(crate) fn check_count(what: &str, n: usize) -> Result<(), InvalidInput> {
    if n == 0 || n > MAX_BATCH {
        return Err(InvalidInput::Option(format!(
            "{what} holds 1 to {MAX_BATCH} items, not {n}"
        )));
    }
    Ok(())
}

/// Builds the send results from the script's reply: it reports the server time and the first
/// sequence number, from which due times and generated ids follow, and the duplicates.
fn parse_sent(value: Value, sent: &[(&SendOptions, DueSpec)]) -> Result<Vec<Sent>> {
    let mut r = Reply::new(value)?;
    let now_us = r.uint()?;
    let first_seq = r.uint()?;
    let mut duplicates = HashMap::new();
    while r.remaining() > 0 {
        let position = r.uint()?;
        duplicates.insert(position, r.int()?);
    }
    let mut out = Vec::with_capacity(sent.len());
    for (i, (options, spec)) in (1u64..).zip(sent) {
        let result = match (duplicates.get(&i), &options.id) {
            (Some(due), Some(id)) => Sent {
                id: id.clone(),
                due_ms: u64::try_from(*due).ok(),
                duplicate: true,
            },
            (Some(_), None) => {
                return Err(Error::Protocol(
                    "a generated id reported as duplicate".into(),
                ))
            }
            (None, id) => {
                let due_us = spec.due_us(now_us);
                Sent {
                    id: id
                        .clone()
                        .unwrap_or_else(|| record::generated_id(due_us, first_seq + i)),
                    due_ms: Some(due_us / 1000),
                    duplicate: false,
                }
            }
        };
        out.push(result);
    }
    Ok(out)
}

fn flags(value: Value) -> Result<Vec<bool>> {
    let mut r = Reply::new(value)?;
    let mut out = Vec::with_capacity(r.remaining());
    while r.remaining() > 0 {
        out.push(r.int()? == 1);
    }
    Ok(out)
}

/// A lease's name in Redis: sequence bytes then the 48-bit token, big-endian.
pub(crate) fn lease_member(seq: [u8; 6], token: u64) -> [u8; 12] {
    let mut member = [0u8; 12];
    member[..6].copy_from_slice(&seq);
    member[6..].copy_from_slice(&token.to_be_bytes()[2..]);
    member
}

fn lease_result(delivery: &Delivery, ok: bool) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::LeaseLost {
            id: delivery.id.clone(),
        })
    }
}
