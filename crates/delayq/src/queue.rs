//! A handle on one queue: producing, inspecting and settling messages. On a queue of one
//! partition every method is one script call (one round trip), atomic on the Redis side; the
//! one exception is a batch send without caller ids (see `send_generated`). On a queue of
//! several partitions (`partitions.rs`) a message's partition follows from its id, so a call
//! about one message is still one script call; batches are split by partition, one call
//! each, atomic per partition; counts add up over the partitions.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::{Script, ScriptInvocation, Value};
use tokio::sync::OnceCell;
use tokio::time::Instant;

use crate::connection;
use crate::consumer::{Claim, Consumer, Delivery, ReceiveOptions};
use crate::dead_letters::DeadLetters;
use crate::error::{Error, InvalidInput, Result};
use crate::error_history;
use crate::keys::Keys;
use crate::message::{
    parse_state, Amend, CancelOutcome, DeadLettered, MessageInfo, NackOutcome, Next, RateLimit,
    Sent, State, Stats,
};
use crate::names::{check_caller_id, check_lookup_id, QueueName};
use crate::options::{checked_ms, Config, DueSpec, Message, Replicas, Schedule, SendOptions};
use crate::partitions::{self, join_all, Layout};
use crate::receipt::{Held, Receipt};
use crate::record;
use crate::recording::QueueMetrics;
use crate::reply::Reply;
use crate::scripts::SCRIPTS;
use crate::settings::Setting;
use crate::wakeup::Subscriptions;

/// Most messages in one batch call (sends, claims, acks): keeps each script short, so one
/// call never holds up Redis for long.
pub const MAX_BATCH: usize = 1000;

/// Most payload bytes in one batch send: one script call that large would hold up Redis (and
/// every other client) while it copies the batch.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;

/// Most expired leases one claim reclaims; the rest follow on the next call.
const RECLAIM_PER_CLAIM: usize = 100;

/// A queue's partitions, learnt from Redis on first use and shared by every handle on the
/// queue made from one [`DelayQ`](crate::DelayQ).
pub(crate) type LayoutCell = Arc<OnceCell<Arc<Layout>>>;

/// A handle on one queue. Cheap to clone; clones share the connection.
#[derive(Clone)]
pub struct Queue {
    name: QueueName,
    layout: LayoutCell,
    /// The client's connection for sends that wait for replicas.
    durable: Arc<OnceCell<connection::Ordinary>>,
    target: crate::client::Target,
    conn: connection::Ordinary,
    config: Arc<Config>,
    subscriptions: Arc<Subscriptions>,
    metrics: Arc<QueueMetrics>,
}

impl Queue {
    pub(crate) fn new(
        name: QueueName,
        layout: LayoutCell,
        durable: Arc<OnceCell<connection::Ordinary>>,
        target: crate::client::Target,
        conn: connection::Ordinary,
        config: Arc<Config>,
        subscriptions: Arc<Subscriptions>,
    ) -> Self {
        Queue {
            metrics: Arc::new(QueueMetrics::new(&name)),
            name,
            layout,
            durable,
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

    /// How many partitions the queue has (fixed when it is first used: see
    /// [`DelayQ::create_queue`](crate::DelayQ::create_queue)); 1 for a queue not used yet.
    pub async fn partitions(&self) -> Result<u16> {
        Ok(self.known_layout().await?.count() as u16)
    }

    /// The queue's partitions, read from Redis once, and recorded there for a queue not
    /// used yet: what sends and consumers go by, since they start using the queue.
    pub(crate) async fn layout(&self) -> Result<Arc<Layout>> {
        let layout = self
            .layout
            .get_or_try_init(|| async {
                let count = self.record_partitions(Some(None)).await?;
                Ok::<_, Error>(Arc::new(Layout::new(&self.name, count.unwrap_or(1))))
            })
            .await?;
        Ok(layout.clone())
    }

    /// The queue's partitions for a call that only looks or settles: nothing is recorded for
    /// a queue not used yet, which has one partition (and nothing in it) until it is.
    pub(crate) async fn known_layout(&self) -> Result<Arc<Layout>> {
        if let Some(layout) = self.layout.get() {
            return Ok(layout.clone());
        }
        match self.record_partitions(None).await? {
            Some(count) => {
                let layout = Arc::new(Layout::new(&self.name, count));
                Ok(self.layout.get_or_init(|| async { layout }).await.clone())
            }
            None => Ok(Arc::new(Layout::new(&self.name, 1))),
        }
    }

    /// Reads the queue's partition count, `None` if it has none yet; with `Some(wanted)`,
    /// records `wanted` (1 for `None`) for a queue that has none, and returns what Redis
    /// holds.
    pub(crate) async fn record_partitions(
        &self,
        wanted: Option<Option<u16>>,
    ) -> Result<Option<u16>> {
        let mut inv = SCRIPTS.partitions.prepare_invoke();
        inv.key(Keys::partitions(&self.name))
            .key(Keys::new(self.name.as_str()).seq());
        let records = wanted.is_some();
        match wanted {
            None => inv.arg("?"),
            Some(None) => inv.arg(""),
            Some(Some(p)) => inv.arg(p),
        };
        let count = partitions::parse_count(&self.invoke(&inv).await?)?;
        if records {
            // The registry lives in a slot of its own, so it cannot be written by the script
            // above on a cluster. This runs once per queue per client (the layout is learnt
            // once), never once per message.
            let _: i64 = redis::cmd("SADD")
                .arg(Keys::QUEUES)
                .arg(self.name.as_str())
                .query_async(&mut self.connection())
                .await?;
        }
        Ok(count)
    }

    /// The live wake-up subscription of partition `keys`, shared with its other consumers.
    pub(crate) async fn subscription(
        &self,
        keys: &Keys,
    ) -> Result<Arc<crate::wakeup::Subscription>> {
        self.subscriptions
            .get(&self.target, &self.config, keys.wake())
            .await
    }

    pub(crate) fn connection(&self) -> connection::Conn {
        self.conn.get()
    }

    /// Sends one message.
    pub async fn send(&self, payload: impl AsRef<[u8]>, options: &SendOptions) -> Result<Sent> {
        let prepared = self.prepare(payload.as_ref(), options)?;
        let layout = self.layout().await?;
        let k = match &options.id {
            Some(id) => layout.for_caller_id(id),
            None => layout.next(),
        };
        let value = match options.replicas {
            None => {
                let mut inv = invocation(layout.part(k), &SCRIPTS.send);
                send_args(&mut inv, &layout, k, [(options, &prepared)]);
                self.invoke(&inv).await?
            }
            Some(replicas) => {
                let cmd = replicated_send(&layout, k, [(options, &prepared)]);
                self.send_and_wait(layout.part(k), cmd, replicas).await?
            }
        };
        let mut sent = parse_sent(value, &[(options, prepared.0)], layout.count())?;
        self.count_sent(&sent);
        sent.pop()
            .ok_or_else(|| Error::Protocol("send returned nothing".into()))
    }

    /// Sends up to [`MAX_BATCH`] messages at once. If any message is invalid, nothing is
    /// written. On a queue of one partition the batch is atomic: it becomes visible whole.
    /// On a queue of several it is split by partition, one call each (run together), each
    /// atomic; if one fails the others may have landed, so retry a failed batch with
    /// caller ids, whose duplicates are recognised. One round trip, or two for a batch
    /// without caller ids (which is then several times cheaper for Redis). Results are in
    /// input order.
    pub async fn send_batch(&self, messages: &[Message]) -> Result<Vec<Sent>> {
        check_batch(messages.len())?;
        let bytes: usize = messages.iter().map(|m| m.payload.len()).sum();
        if bytes > MAX_BATCH_BYTES {
            return Err(InvalidInput::Option(format!(
                "a batch holds at most {MAX_BATCH_BYTES} payload bytes, not {bytes}"
            ))
            .into());
        }
        let mut prepared = Vec::with_capacity(messages.len());
        for m in messages {
            prepared.push(self.prepare(&m.payload, &m.options)?);
        }
        let layout = self.layout().await?;
        let groups = partitions::group(layout.count(), messages, |m| match &m.options.id {
            Some(id) => layout.for_caller_id(id),
            None => layout.next(),
        });
        let calls = groups
            .iter()
            .map(|(k, positions)| self.send_group(&layout, *k, positions, messages, &prepared));
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
        self.count_sent(&sent);
        Ok(sent)
    }

    /// Sends the messages at `positions` to partition `k`, in one call.
    async fn send_group(
        &self,
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
            let value = self.send_and_wait(layout.part(k), cmd, replicas).await?;
            let specs: Vec<_> = positions
                .iter()
                .map(|&i| (&messages[i].options, prepared[i].0))
                .collect();
            return parse_sent(value, &specs, layout.count());
        }
        let generated = |i: usize| {
            let options = &messages[i].options;
            options.id.is_none() && options.priority == crate::options::DEFAULT_PRIORITY
        };
        if positions.iter().all(|&i| generated(i)) {
            let bodies = positions.iter().map(|&i| &prepared[i]);
            return self.send_generated(layout, k, bodies).await;
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
        parse_sent(self.invoke(&inv).await?, &specs, layout.count())
    }

    pub(crate) fn count_sent(&self, sent: &[Sent]) {
        let new = sent.iter().filter(|s| !s.duplicate).count();
        self.metrics.sent.increment(new as u64);
    }

    /// A batch without caller ids (of the default priority) needs no duplicate check, so it skips Lua, whose string
    /// handling was most of a send's cost: one transaction reserves sequence numbers and reads
    /// the server's clock, a second adds every record (built here, byte for byte as
    /// `send.lua` would) and wakes a consumer. Nothing is visible before the second lands,
    /// and it lands whole.
    async fn send_generated<'p>(
        &self,
        layout: &Layout,
        k: usize,
        prepared: impl ExactSizeIterator<Item = &'p (DueSpec, Vec<u8>)>,
    ) -> Result<Vec<Sent>> {
        let keys = layout.part(k);
        let count = prepared.len() as u64;
        let stride = layout.count() as u64;
        let mut conn = self.conn.get();
        let mut reserve = redis::pipe();
        reserve.atomic();
        if stride > 1 {
            // As send.lua does: sequence numbers of partition k are k modulo P.
            reserve.cmd("SET").arg(keys.seq()).arg(k).arg("NX");
        }
        reserve.incr(keys.seq(), count * stride).cmd("TIME");
        let mut replies = conn.transaction_at(keys.slot(), &reserve).await?;
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
        let mut zadd = redis::cmd("ZADD");
        zadd.arg(keys.pending());
        let mut sent = Vec::with_capacity(count as usize);
        for ((spec, body), i) in prepared.zip(1..) {
            let seq = first_seq + i * stride;
            let due_us = spec.due_us(now_us);
            zadd.arg("0").arg(record::with_sort_key(due_us, seq, body));
            sent.push(Sent {
                id: record::generated_id(due_us, seq),
                due_ms: Some(due_us / 1000),
                duplicate: false,
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
            .arg(crate::history::TTL_SECS)
            // As wake() in prelude.lua does.
            .cmd("SPUBLISH")
            .arg(keys.wake())
            .arg(1);
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
        &self,
        keys: &Keys,
        send: redis::Cmd,
        replicas: Replicas,
    ) -> Result<Value> {
        let timeout_ms = checked_ms(replicas.timeout, "replica timeout")?;
        let mut pipe = redis::pipe();
        pipe.add_command(send)
            .cmd("WAIT")
            .arg(replicas.count)
            .arg(timeout_ms);
        let durable = self
            .durable
            .get_or_try_init(|| {
                // Its replies may wait for replicas on top of the usual response time.
                let timeout = self.config.response_timeout + crate::options::MAX_REPLICA_WAIT;
                let config = (*self.config).clone().response_timeout(timeout);
                async move { self.target.connect(&config).await }
            })
            .await?;
        let mut conn = durable.get();
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

    /// Validates a message and encodes its record body.
    pub(crate) fn prepare(
        &self,
        payload: &[u8],
        options: &SendOptions,
    ) -> Result<(DueSpec, Vec<u8>)> {
        self.check_payload(payload)?;
        if let Some(id) = &options.id {
            check_caller_id(id)?;
        }
        if options.priority > crate::options::MAX_PRIORITY {
            return Err(InvalidInput::Option(format!(
                "a priority is 0 to {}, not {}",
                crate::options::MAX_PRIORITY,
                options.priority
            ))
            .into());
        }
        if options.max_attempts == 0 {
            return Err(InvalidInput::Option("max attempts must be at least 1".into()).into());
        }
        options.backoff.validate()?;
        let due = options.schedule.to_spec()?;
        if let Some(timeout) = options.handler_timeout {
            crate::options::check_handler_timeout(timeout)?;
        }
        if let Some(replicas) = options.replicas {
            let limit = crate::options::MAX_REPLICA_WAIT;
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

    /// The partition that holds the message `id`, with its keys: an invocation of `script`
    /// there.
    async fn by_id<'s>(&self, id: &str, script: &'s Script) -> Result<ScriptInvocation<'s>> {
        check_lookup_id(id)?;
        let layout = self.known_layout().await?;
        let mut inv = invocation(layout.part(layout.for_id(id)), script);
        inv.arg(id);
        Ok(inv)
    }

    /// Removes a delayed or ready message. An in-flight or dead message is left alone and
    /// reported as such.
    pub async fn cancel(&self, id: &str) -> Result<CancelOutcome> {
        let inv = self.by_id(id, &SCRIPTS.cancel).await?;
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
        let spec = schedule.to_spec()?;
        let mut inv = self.by_id(id, &SCRIPTS.reschedule).await?;
        inv.arg(spec.arg());
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
        let inv = self.by_id(id, &SCRIPTS.get).await?;
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        let Some(state) = parse_state(&r.string()?)? else {
            return Ok(None);
        };
        read_message(&mut r, id.to_owned(), state).map(Some)
    }

    /// Counts per state and the lag of the oldest ready message: one atomic read per
    /// partition (all at once), added up.
    pub async fn stats(&self) -> Result<Stats> {
        let layout = self.known_layout().await?;
        let reads = layout.parts().iter().map(|keys| self.partition_stats(keys));
        let mut total = Stats::default();
        for stats in join_all(reads).await {
            let s = stats?;
            total.delayed += s.delayed;
            total.ready += s.ready;
            total.in_flight += s.in_flight;
            total.dead += s.dead;
            total.oldest_ready_lag_ms = total.oldest_ready_lag_ms.max(s.oldest_ready_lag_ms);
            total.paused |= s.paused;
            total.idempotency_window = total.idempotency_window.max(s.idempotency_window);
            total.rate_limit = total.rate_limit.or(s.rate_limit);
            total.push |= s.push;
        }
        Ok(total)
    }

    /// Pauses the queue: no consumer (library, HTTP) is given a message until
    /// [`resume`](Self::resume), starting with its next claim. Sends are still accepted, and
    /// messages already in flight are settled as usual. The state lives in Redis, so it holds
    /// for every client and across restarts, and [`stats`](Self::stats) shows it. Pausing a
    /// paused queue does nothing. Like a send, it fixes the partition count of a queue not
    /// yet created (one). Each partition is paused by a call of its own; if one fails, pause
    /// again.
    pub async fn pause(&self) -> Result<()> {
        self.set_paused(true).await
    }

    /// Resumes a paused queue: waiting consumers are woken and claim what is due at once.
    /// Resuming a queue that is not paused does nothing.
    pub async fn resume(&self) -> Result<()> {
        self.set_paused(false).await
    }

    async fn set_paused(&self, paused: bool) -> Result<()> {
        let value = if paused { "1" } else { "" };
        let layout = self.layout().await?;
        self.control(&layout, &[("paused", value.to_owned())]).await
    }

    /// Changes the queue's settings ([`Setting`]), all of them or, if one is refused, none.
    /// Each partition takes them in one call; if one of those fails, configure again.
    pub async fn configure(&self, settings: &[Setting]) -> Result<()> {
        // Checked before the layout is read, which records one for a queue not used yet: a
        // refused setting must not create the queue.
        for setting in settings {
            setting.fields(1)?;
        }
        let layout = self.layout().await?;
        let parts = layout.count() as u16;
        let mut fields = Vec::new();
        for setting in settings {
            fields.extend(setting.fields(parts)?);
        }
        self.control(&layout, &fields).await
    }

    /// [`configure`](Self::configure) with [`Setting::IdempotencyWindow`].
    pub async fn set_idempotency_window(&self, window: Duration) -> Result<()> {
        self.configure(&[Setting::IdempotencyWindow(window)]).await
    }

    /// [`configure`](Self::configure) with [`Setting::RateLimit`].
    pub async fn set_rate_limit(&self, limit: Option<RateLimit>) -> Result<()> {
        self.configure(&[Setting::RateLimit(limit)]).await
    }

    /// Writes `fields` (a value of '' clears one) to the control hash of every partition
    /// (control.lua), all at once.
    async fn control(&self, layout: &Layout, fields: &[(&'static str, String)]) -> Result<()> {
        let calls: Vec<_> = layout
            .parts()
            .iter()
            .map(|keys| {
                let mut inv = invocation(keys, &SCRIPTS.control);
                for (name, value) in fields {
                    inv.arg(*name).arg(value);
                }
                inv
            })
            .collect();
        for reply in join_all(calls.iter().map(|inv| self.invoke(inv))).await {
            reply?;
        }
        Ok(())
    }

    async fn partition_stats(&self, keys: &Keys) -> Result<Stats> {
        let inv = invocation(keys, &SCRIPTS.stats);
        let mut r = Reply::new(self.invoke(&inv).await?)?;
        Ok(Stats {
            delayed: r.uint()?,
            ready: r.uint()?,
            in_flight: r.uint()?,
            dead: r.uint()?,
            oldest_ready_lag_ms: r.uint()?,
            paused: r.uint()? == 1,
            idempotency_window: Duration::from_millis(r.uint()?),
            rate_limit: crate::settings::parse_limit(&r.string()?),
            push: r.uint()? == 1,
        })
    }

    /// A consumer of this queue (of all its partitions). Consumers are cheap: those made
    /// from one [`DelayQ`](crate::DelayQ) share one connection for wake-ups.
    pub async fn consumer(&self) -> Result<Consumer> {
        Consumer::new(crate::queue_set::QueueSet::single(self.clone()), true).await
    }

    /// The dead letters of this queue.
    pub fn dead_letters(&self) -> DeadLetters<'_> {
        DeadLetters::new(self)
    }

    /// The recurring schedules of this queue.
    pub fn schedules(&self) -> crate::Schedules<'_> {
        crate::Schedules::new(self)
    }

    /// Claims up to `options.max` due messages from partition `keys` (one script call, no
    /// waiting); with `repeat`, returns what the earlier claim with token base `base` took
    /// instead, if it ran (`claim.lua`); `push` for push delivery ([`QueueSet::pushing`]);
    /// `remember` writes the claim record that a repeat reads (a consumer that never repeats
    /// leaves none). A record that cannot be decoded is moved to the dead letters and left
    /// out; the rest of the claim is delivered.
    pub(crate) async fn claim(
        &self,
        keys: &Keys,
        claim_record: &str,
        options: &ReceiveOptions,
        (base, repeat, remember): (u64, bool, bool),
        push: bool,
    ) -> Result<Claim> {
        let lease_ms = checked_ms(options.lease, "lease")?;
        let mut inv = invocation(keys, &SCRIPTS.claim);
        inv.key(claim_record)
            .arg(options.max)
            .arg(lease_ms)
            .arg(rand::random::<f64>())
            .arg(RECLAIM_PER_CLAIM)
            .arg(base)
            .arg(if repeat { "1" } else { "0" })
            .arg(if push { "1" } else { "0" })
            .arg(if remember { "1" } else { "0" });
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
                        priority: rec.priority,
                    })
                }
                Err(e) => undecodable.push((lease_member(seq, token), e.to_string())),
            }
        }
        m.delivered.increment(deliveries.len() as u64);
        if !undecodable.is_empty() {
            dead_lettered.extend(self.bury(keys, &undecodable).await);
        }
        Ok(Claim {
            dead_lettered,
            deliveries,
            next_event: u64::try_from(next_event_us).ok().map(Duration::from_micros),
        })
    }

    /// Moves claimed messages whose record could not be decoded to the dead letters. A
    /// failure is only logged: the messages come back when their lease expires.
    async fn bury(&self, keys: &Keys, undecodable: &[([u8; 12], String)]) -> Vec<DeadLettered> {
        let mut inv = invocation(keys, &SCRIPTS.bury);
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
        let acked = self
            .per_partition(
                held,
                &SCRIPTS.ack,
                |_| {},
                |inv, d| {
                    inv.arg(&d.lease_member()[..])
                        .arg(d.id())
                        .arg(if d.explicit_id() { "1" } else { "0" });
                    Ok(())
                },
                flags,
            )
            .await?;
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
        let layout = self.known_layout().await?;
        let mut inv = invocation(layout.part(layout.for_seq(held.seq())), &SCRIPTS.nack);
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
        for (_, _, amend) in failures {
            self.check_amend(amend)?;
        }
        let items: Vec<(&Delivery, &(String, Next, Amend))> =
            deliveries.iter().zip(failures).collect();
        let outcomes = self
            .per_partition(
                &items,
                &SCRIPTS.nack,
                |_| {},
                |inv, (d, (error, next, amend))| push_failure(inv, *d, error, *next, amend),
                strings,
            )
            .await?;
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
        let outcomes = self
            .per_partition(
                held,
                &SCRIPTS.nack,
                |_| {},
                |inv, d| {
                    inv.arg(&d.lease_member()[..])
                        .arg("r")
                        .arg("")
                        .arg("")
                        .arg(0)
                        .arg("")
                        .arg("");
                    Ok(())
                },
                strings,
            )
            .await?;
        Ok(outcomes.iter().map(|o| o == "released").collect())
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
        let deadlines = self
            .per_partition(
                held,
                &SCRIPTS.extend,
                |inv| {
                    inv.arg(lease_ms);
                },
                |inv, d| {
                    inv.arg(&d.lease_member()[..]);
                    Ok(())
                },
                uints,
            )
            .await?;
        Ok(deadlines
            .into_iter()
            .map(|d| (d > 0).then_some(d))
            .collect())
    }

    /// Runs `script` once per partition that holds some of `items` (all at once), with the
    /// arguments `start` gives first and `push` gives each item there, and returns the
    /// per-item results that `read` takes from each reply, in the order of `items`.
    async fn per_partition<T: Held, R>(
        &self,
        items: &[T],
        script: &Script,
        start: impl Fn(&mut ScriptInvocation<'_>),
        push: impl Fn(&mut ScriptInvocation<'_>, &T) -> Result<()>,
        read: fn(Value) -> Result<Vec<R>>,
    ) -> Result<Vec<R>> {
        let layout = self.known_layout().await?;
        let groups = partitions::group(layout.count(), items, |item| layout.for_seq(item.seq()));
        let mut invocations = Vec::with_capacity(groups.len());
        for (k, positions) in &groups {
            let mut inv = invocation(layout.part(*k), script);
            start(&mut inv);
            for &i in positions {
                push(&mut inv, &items[i])?;
            }
            invocations.push(inv);
        }
        let replies = join_all(invocations.iter().map(|inv| self.invoke(inv))).await;
        let mut out: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
        for (reply, (_, positions)) in replies.into_iter().zip(&groups) {
            let results = read(reply?)?;
            if results.len() != positions.len() {
                return Err(Error::Protocol(format!(
                    "expected {} results, got {}",
                    positions.len(),
                    results.len()
                )));
            }
            for (result, &i) in results.into_iter().zip(positions) {
                out[i] = Some(result);
            }
        }
        Ok(out.into_iter().flatten().collect())
    }

    pub(crate) async fn invoke(&self, inv: &ScriptInvocation<'_>) -> Result<Value> {
        let mut conn = self.conn.get();
        Ok(inv.invoke_async(&mut conn).await?)
    }
}

/// A message as `get.lua` and `browse.lua` return it, from its due time on: due ms,
/// attempts, max attempts, error history, payload, lease deadline or died-at ms, flags byte,
/// priority.
pub(crate) fn read_message(r: &mut Reply, id: String, state: State) -> Result<MessageInfo> {
    let due_ms = r.uint()?;
    let attempts = r.uint()? as u32;
    let max_attempts = r.uint()? as u32;
    let (last_error, errors) = error_history::read(r.opt_bytes()?);
    let payload = r.bytes()?;
    let extra = r.uint()?;
    let kind = record::kind_of(r.uint()? as u8);
    let priority = r.uint()? as u8;
    Ok(MessageInfo {
        priority,
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
    })
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
/// sequence number, from which due times and generated ids follow (numbers `stride`, the
/// partition count, apart), and the duplicates.
fn parse_sent(value: Value, sent: &[(&SendOptions, DueSpec)], stride: usize) -> Result<Vec<Sent>> {
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
                    id: id.clone().unwrap_or_else(|| {
                        let seq = first_seq + i * stride as u64;
                        record::generated_id(due_us, record::level_base(options.priority) + seq)
                    }),
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

fn strings(value: Value) -> Result<Vec<String>> {
    let mut r = Reply::new(value)?;
    let mut out = Vec::with_capacity(r.remaining());
    while r.remaining() > 0 {
        out.push(r.string()?);
    }
    Ok(out)
}

fn uints(value: Value) -> Result<Vec<u64>> {
    let mut r = Reply::new(value)?;
    let mut out = Vec::with_capacity(r.remaining());
    while r.remaining() > 0 {
        out.push(r.uint()?);
    }
    Ok(out)
}

/// A script invocation with partition `keys` in place.
pub(crate) fn invocation<'a>(keys: &Keys, script: &'a Script) -> ScriptInvocation<'a> {
    let mut inv = script.prepare_invoke();
    for key in keys.all() {
        inv.key(key);
    }
    inv
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
/// each message's caller id (or ''), due time, priority and record body.
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
        args.push(due.arg());
        args.push(options.priority);
        args.push(body.as_slice());
    }
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
