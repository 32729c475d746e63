//! What a caller can ask for: when a message is due, how it is retried, how it is received,
//! and the client's limits. Every option is validated before anything reaches Redis.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::values::error::InvalidInput;
use crate::values::expiry::Expiry;
use crate::values::upsert::{IfInFlight, OnDuplicate};

/// Longest delay (and backoff step) delayq accepts: about ten years. Anything longer is almost
/// certainly a unit mistake.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// Most messages in one batch call (sends, claims, acks): keeps each script short, so one
/// call never holds up Redis for long.
pub const MAX_BATCH: usize = 1000;

/// Every count that becomes one script call (batch, claim, page) is 1 to [`MAX_BATCH`].
pub(crate) fn check_count(what: &str, n: usize) -> Result<(), InvalidInput> {
    if n == 0 || n > MAX_BATCH {
        return Err(InvalidInput::Option(format!(
            "{what} holds 1 to {MAX_BATCH} items, not {n}"
        )));
    }
    Ok(())
}

/// When a message becomes due. Due times are judged by the Redis server's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Schedule {
    /// Ready at once.
    #[default]
    Now,
    /// Due this long after Redis receives the request.
    After(Duration),
    /// Due at this absolute time, in milliseconds since the Unix epoch. A time in the past is
    /// ready at once.
    At(u64),
}

impl Schedule {
    /// The schedule as the scripts take it, validated.
    pub(crate) fn to_spec(self) -> Result<DueSpec, InvalidInput> {
        match self {
            Schedule::Now => Ok(DueSpec::After(0)),
            Schedule::After(delay) => Ok(DueSpec::After(checked_ms(delay, "delay")?)),
            Schedule::At(at_ms) => {
                let horizon = now_ms().saturating_add(MAX_DELAY.as_millis() as u64);
                if at_ms > horizon {
                    return Err(InvalidInput::Schedule(format!(
                        "deliver-at {at_ms} ms is more than ten years away"
                    )));
                }
                Ok(DueSpec::At(at_ms))
            }
        }
    }
}

/// A validated schedule in milliseconds, relative to the server's now or absolute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DueSpec {
    After(u64),
    At(u64),
}

impl DueSpec {
    /// As the scripts take it: `<ms>` or `@<ms>`.
    pub(crate) fn arg(self) -> String {
        match self {
            DueSpec::After(ms) => ms.to_string(),
            DueSpec::At(ms) => format!("@{ms}"),
        }
    }

    /// The due time in µs, computed exactly as `due_from` in the scripts' prelude does.
    pub(crate) fn due_us(self, now_us: u64) -> u64 {
        match self {
            DueSpec::After(ms) => now_us + ms * 1000,
            DueSpec::At(ms) => ms * 1000,
        }
    }
}

/// Most delays an explicit backoff list ([`Backoff::steps`]) holds.
pub const MAX_BACKOFF_STEPS: usize = 8;

/// How long to wait before retrying a failed delivery. Every kind can be shortened at random
/// by up to `jitter_percent` percent ([`with_jitter`](Backoff::with_jitter)), so that
/// failures that happened together are not retried together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backoff {
    /// The same delay before every retry.
    Fixed {
        /// Delay before each retry.
        delay: Duration,
        /// Random shortening, 0 to 100 percent.
        jitter_percent: u8,
    },
    /// `base * factor^(retry-1)`, at most `cap`.
    Exponential {
        /// Delay before the first retry.
        base: Duration,
        /// Largest delay.
        cap: Duration,
        /// Growth per attempt (1 to 255).
        factor: u8,
        /// Random shortening, 0 to 100 percent.
        jitter_percent: u8,
    },
    /// `base * retry`, at most `cap`: 30 s, 60 s, 90 s, ...
    Linear {
        /// Delay before the first retry, and the step by which each next one grows.
        base: Duration,
        /// Largest delay.
        cap: Duration,
        /// Random shortening, 0 to 100 percent.
        jitter_percent: u8,
    },
    /// An explicit list: the n-th retry waits the n-th delay, and the last one repeats.
    Steps {
        /// The delays.
        delays: StepDelays,
        /// Random shortening, 0 to 100 percent.
        jitter_percent: u8,
    },
}

/// The delays of a [`Backoff::Steps`], kept inline (at most [`MAX_BACKOFF_STEPS`]) so that
/// a backoff stays `Copy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepDelays {
    ms: [u64; MAX_BACKOFF_STEPS],
    /// As many as were given, which validation holds to 1..=MAX_BACKOFF_STEPS.
    given: usize,
}

impl StepDelays {
    /// The delays, in order.
    pub fn iter(&self) -> impl Iterator<Item = Duration> + '_ {
        self.ms[..self.given.min(MAX_BACKOFF_STEPS)]
            .iter()
            .map(|ms| Duration::from_millis(*ms))
    }

    pub(crate) fn ms(&self) -> &[u64] {
        &self.ms[..self.given.min(MAX_BACKOFF_STEPS)]
    }
}

impl Backoff {
    /// A fixed delay between attempts.
    pub fn fixed(delay: Duration) -> Self {
        Backoff::Fixed {
            delay,
            jitter_percent: 0,
        }
    }

    /// Doubling delays from `base` up to `cap`, without jitter.
    pub fn exponential(base: Duration, cap: Duration) -> Self {
        Backoff::Exponential {
            base,
            cap,
            factor: 2,
            jitter_percent: 0,
        }
    }

    /// Delays growing by `base` per retry (`base`, `2 * base`, ...) up to `cap`, without
    /// jitter.
    pub fn linear(base: Duration, cap: Duration) -> Self {
        Backoff::Linear {
            base,
            cap,
            jitter_percent: 0,
        }
    }

    /// The listed delays in turn, the last one repeating (`30s, 2m, 10m`: 30 s before the
    /// first retry, 2 min before the second, 10 min before every later one). 1 to
    /// [`MAX_BACKOFF_STEPS`] delays; more or none fail the send.
    pub fn steps(delays: &[Duration]) -> Self {
        let mut ms = [0u64; MAX_BACKOFF_STEPS];
        for (slot, d) in ms.iter_mut().zip(delays) {
            *slot = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        }
        Backoff::Steps {
            delays: StepDelays {
                ms,
                given: delays.len(),
            },
            jitter_percent: 0,
        }
    }

    /// Sets the growth factor of an exponential backoff (no effect on the others).
    pub fn with_factor(mut self, new_factor: u8) -> Self {
        if let Backoff::Exponential { factor, .. } = &mut self {
            *factor = new_factor;
        }
        self
    }

    /// Sets the jitter: each delay is shortened at random by up to `percent` percent.
    pub fn with_jitter(mut self, percent: u8) -> Self {
        match &mut self {
            Backoff::Fixed { jitter_percent, .. }
            | Backoff::Exponential { jitter_percent, .. }
            | Backoff::Linear { jitter_percent, .. }
            | Backoff::Steps { jitter_percent, .. } => *jitter_percent = percent,
        }
        self
    }

    pub(crate) fn jitter_percent(&self) -> u8 {
        match *self {
            Backoff::Fixed { jitter_percent, .. }
            | Backoff::Exponential { jitter_percent, .. }
            | Backoff::Linear { jitter_percent, .. }
            | Backoff::Steps { jitter_percent, .. } => jitter_percent,
        }
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidInput> {
        if self.jitter_percent() > 100 {
            return Err(InvalidInput::Option(
                "backoff jitter is a percentage, 0 to 100".into(),
            ));
        }
        match *self {
            Backoff::Fixed { delay, .. } => checked_ms(delay, "backoff delay").map(drop),
            Backoff::Exponential {
                base, cap, factor, ..
            } => {
                checked_ms(base, "backoff base")?;
                checked_ms(cap, "backoff cap")?;
                if factor == 0 {
                    return Err(InvalidInput::Option(
                        "backoff factor must be at least 1".into(),
                    ));
                }
                Ok(())
            }
            Backoff::Linear { base, cap, .. } => {
                checked_ms(base, "backoff base")?;
                checked_ms(cap, "backoff cap").map(drop)
            }
            Backoff::Steps { delays, .. } => {
                if delays.given == 0 || delays.given > MAX_BACKOFF_STEPS {
                    return Err(InvalidInput::Option(format!(
                        "a backoff list holds 1 to {MAX_BACKOFF_STEPS} delays, not {}",
                        delays.given
                    )));
                }
                for d in delays.iter() {
                    checked_ms(d, "backoff delay")?;
                }
                Ok(())
            }
        }
    }
}

impl Default for Backoff {
    /// 1 s, 2 s, 4 s, ... up to 10 minutes, each shortened by up to 10 %.
    fn default() -> Self {
        Backoff::exponential(Duration::from_secs(1), Duration::from_secs(600)).with_jitter(10)
    }
}

/// What a payload is, stored with the message and returned with it, so that bytes sent as
/// bytes never come back as JSON and the other way round. The library stores payloads as
/// bytes either way and does not check them; the HTTP server uses this to answer JSON with
/// JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
#[non_exhaustive]
pub enum PayloadKind {
    /// Opaque bytes.
    #[default]
    Bytes,
    /// A JSON document, as UTF-8 text.
    Json,
}

/// The priority of a message whose sender did not give one: the middle of 0 to
/// [`MAX_PRIORITY`].
pub const DEFAULT_PRIORITY: u8 = 5;

/// The highest priority ([`SendOptions::priority`]); 0 is the lowest.
pub const MAX_PRIORITY: u8 = 9;

/// Default number of deliveries before a message is dead-lettered.
pub const DEFAULT_MAX_ATTEMPTS: u16 = 5;

/// Options of one message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendOptions {
    pub(crate) schedule: Schedule,
    pub(crate) id: Option<String>,
    pub(crate) max_attempts: u16,
    pub(crate) backoff: Backoff,
    pub(crate) kind: PayloadKind,
    pub(crate) handler_timeout: Option<Duration>,
    pub(crate) replicas: Option<Replicas>,
    pub(crate) priority: u8,
    pub(crate) group: Option<String>,
    pub(crate) expiry: Option<Expiry>,
    pub(crate) on_duplicate: OnDuplicate,
    pub(crate) if_in_flight: IfInFlight,
    /// W3C trace context to carry (`trace_context.rs`).
    pub(crate) traceparent: Option<String>,
    /// Set by the send, never by a caller: the payload is sealed (`sealing.rs`), on a queue
    /// that encrypts.
    pub(crate) sealed: bool,
}

/// Longest wait for replicas ([`SendOptions::replicas`]).
pub const MAX_REPLICA_WAIT: Duration = Duration::from_secs(10);

/// How many replicas must have a send before it is acknowledged, and how long to wait for
/// them (Redis `WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Replicas {
    pub(crate) count: u32,
    pub(crate) timeout: Duration,
}

impl Default for SendOptions {
    fn default() -> Self {
        SendOptions {
            schedule: Schedule::Now,
            id: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            kind: PayloadKind::Bytes,
            handler_timeout: None,
            replicas: None,
            priority: DEFAULT_PRIORITY,
            group: None,
            expiry: None,
            on_duplicate: OnDuplicate::Keep,
            if_in_flight: IfInFlight::SendAnother,
            traceparent: None,
            sealed: false,
        }
    }
}

impl SendOptions {
    /// Ready now, a generated id, 5 attempts, the default backoff.
    pub fn new() -> Self {
        Self::default()
    }

    /// Due `delay` from now (by the Redis server's clock).
    pub fn delay(mut self, delay: Duration) -> Self {
        self.schedule = Schedule::After(delay);
        self
    }

    /// Due at `at_ms`, milliseconds since the Unix epoch.
    pub fn deliver_at(mut self, at_ms: u64) -> Self {
        self.schedule = Schedule::At(at_ms);
        self
    }

    /// Sets the schedule.
    pub fn schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Gives the message the caller's own id. Sending an id that still exists in the queue
    /// (in any state) creates nothing and reports a duplicate.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// Number of deliveries before the message goes to the dead letters (1 to 65535).
    pub fn max_attempts(mut self, attempts: u16) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// The retry policy.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// What the payload is (bytes by default); delivered back with it.
    pub fn kind(mut self, kind: PayloadKind) -> Self {
        self.kind = kind;
        self
    }

    /// How long a worker's handler may run on this message, in place of the worker's own
    /// `handler_timeout` (1 ms or more). Stored with the message (costs 1 to 4 bytes) and
    /// delivered with it as [`Delivery::handler_timeout`](crate::Delivery::handler_timeout).
    pub fn handler_timeout(mut self, timeout: Duration) -> Self {
        self.handler_timeout = Some(timeout);
        self
    }

    /// The message's priority, 0 (lowest) to [`MAX_PRIORITY`] (default
    /// [`DEFAULT_PRIORITY`]). Among messages that are due, a claim takes higher priorities
    /// first, and within one priority due order then send order; so a backlog of due messages
    /// of lower priority delays one of higher priority by one claim at most (on a queue of
    /// several partitions: by one claim on each partition, since each orders its own). It
    /// decides nothing before the message is due, and stays with it through retries,
    /// requeues and reschedules. Costs no storage; a claim's work grows with the number of
    /// priorities in use.
    pub fn priority(mut self, priority: u8) -> Self {
        self.priority = priority;
        self
    }

    /// Puts the message in group `group` (1 to 128 characters from `[A-Za-z0-9._:@/-]`, as
    /// caller ids): a tenant, a customer, an order. Claims serve the groups that have due
    /// messages in turn, one message each per turn, so a group's backlog delays another
    /// group's message by one turn of the rotation at most; within a group, priority, then
    /// due time, then send order. The queue's [`Setting::GroupConcurrency`] bounds how many
    /// messages of one group are in flight at once (1: the group is delivered in order).
    /// A group lives in one partition (by the hash of its name). Needs the queue's data in
    /// format [`GROUPS_FORMAT`](crate::GROUPS_FORMAT) or later (`Queue::upgrade_format`).
    /// Costs the group's name in the record and an index entry per pending message.
    ///
    /// [`Setting::GroupConcurrency`]: crate::Setting::GroupConcurrency
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Never delivered more than `ttl` after it is due (1 ms to [`MAX_TTL`]): a claim that
    /// finds it later expires it instead (a dead letter with the error `expired`, or
    /// nothing if the queue drops expired messages: [`Setting::OnExpire`](crate::Setting)),
    /// and a retry that would start at or after that time expires it too. Counted from the
    /// due time, so a delayed message gets its whole window. Needs the queue's data in
    /// format [`EXPIRY_FORMAT`](crate::EXPIRY_FORMAT) or later.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.expiry = Some(Expiry::AfterDue(ttl));
        self
    }

    /// Never delivered at or after `at_ms` (unix ms, after its due time), as
    /// [`SendOptions::ttl`] says.
    pub fn expires_at(mut self, at_ms: u64) -> Self {
        self.expiry = Some(Expiry::At(at_ms));
        self
    }

    /// What the send does when a message with its caller id exists: keep it (the default;
    /// the send is a duplicate), replace it, or debounce it ([`OnDuplicate`]). Replacing
    /// and debouncing need a caller id ([`id`](Self::id)).
    pub fn on_duplicate(mut self, on_duplicate: OnDuplicate) -> Self {
        self.on_duplicate = on_duplicate;
        self
    }

    /// What a replace or a debounce does when the id's message is in flight: send a second
    /// message (the default) or refuse ([`IfInFlight`]).
    pub fn if_in_flight(mut self, if_in_flight: IfInFlight) -> Self {
        self.if_in_flight = if_in_flight;
        self
    }

    /// Acknowledges the send only once `count` replicas of the master that took it have it
    /// too (Redis `WAIT count timeout`, sent with the write, on its connection). Fewer within
    /// `timeout` fails the send with [`Error::NotReplicated`](crate::Error::NotReplicated);
    /// the message was written all the same, so retry with a caller id, which recognises
    /// the duplicate. Redis replicates asynchronously: without this, a failover can lose
    /// sends that were acknowledged just before the master died. With it, a send is lost
    /// only if every replica that had it is lost too (or the replica promoted is one that
    /// had not). A batch waits for the most replicas any of its messages asks for. These
    /// sends go over a connection of the client's own, since `WAIT` blocks the connection it
    /// runs on; `timeout` is 1 ms to [`MAX_REPLICA_WAIT`].
    pub fn replicas(mut self, count: u32, timeout: Duration) -> Self {
        self.replicas = Some(Replicas { count, timeout });
        self
    }
}

/// One message of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    /// The bytes to deliver, unchanged.
    pub payload: Vec<u8>,
    /// Its options.
    pub options: SendOptions,
}

impl Message {
    /// A message with `payload` and `options`.
    pub fn new(payload: impl Into<Vec<u8>>, options: SendOptions) -> Self {
        Message {
            payload: payload.into(),
            options,
        }
    }
}

/// How to receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceiveOptions {
    /// Most messages to take (1 to 1000).
    pub max: usize,
    /// Lease of each message taken.
    pub lease: Duration,
    /// Longest time to wait when nothing is due (zero: return at once; `Duration::MAX`:
    /// until something comes due).
    pub wait: Duration,
}

impl Default for ReceiveOptions {
    fn default() -> Self {
        ReceiveOptions {
            max: 1,
            lease: Duration::from_secs(30),
            wait: Duration::from_secs(5),
        }
    }
}

impl ReceiveOptions {
    pub(crate) fn validate(&self) -> Result<(), InvalidInput> {
        check_count("a receive", self.max)?;
        if self.lease < Duration::from_millis(1) {
            return Err(InvalidInput::Option("a lease must be at least 1 ms".into()));
        }
        checked_ms(self.lease, "lease")?;
        Ok(())
    }
}

pub(crate) fn checked_ms(d: Duration, what: &str) -> Result<u64, InvalidInput> {
    if d > MAX_DELAY {
        return Err(InvalidInput::Schedule(format!(
            "{what} of {d:?} is longer than ten years"
        )));
    }
    Ok(d.as_millis() as u64)
}

/// A handler timeout, the worker's or a message's: 1 ms to ten years.
pub(crate) fn check_handler_timeout(timeout: Duration) -> Result<(), InvalidInput> {
    if checked_ms(timeout, "handler timeout")? == 0 {
        return Err(InvalidInput::Option(
            "a handler timeout must be at least 1 ms".into(),
        ));
    }
    Ok(())
}

/// This host's clock in ms. Never decides what is due: it rejects absurd absolute due times,
/// and the scheduler estimates the server's clock from it and the last reading.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
