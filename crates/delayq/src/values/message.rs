//! What delayq tells a caller about messages: send results, inspection results (a
//! message's [`State`] is in `state.rs`).

use crate::values::state::State;

/// The result of sending one message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// The message id: the caller's, or one delayq generated (`<due µs>-<sequence>`).
    pub id: String,
    /// When the message is due, in ms since the Unix epoch by the Redis server's clock.
    /// For a duplicate: the existing message's due time if it is still pending.
    pub due_ms: Option<u64>,
    /// True when a message with this caller id already existed; nothing was written.
    pub duplicate: bool,
    /// An upsert ([`SendOptions::on_duplicate`](crate::SendOptions::on_duplicate)) that
    /// wrote its message in place of one with this caller id: the state that one was in
    /// (`Delayed` or `Ready`: it is gone; `InFlight`: it runs on, superseded).
    pub replaced: Option<State>,
}

/// The result of `cancel`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelOutcome {
    /// The message was removed; it was in this state (`Delayed` or `Ready`).
    Cancelled(State),
    /// The message exists but is `InFlight` or `Dead`; it was left alone.
    NotCancelled(State),
    /// No message with this id.
    NotFound,
}

/// What `get` knows about a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessageInfo {
    /// The id.
    pub id: String,
    /// Its state.
    pub state: State,
    /// Due time in ms since the Unix epoch (for an in-flight or dead message: of its last
    /// delivery).
    pub due_ms: u64,
    /// Deliveries counted so far.
    pub attempts: u32,
    /// Deliveries allowed before dead-lettering.
    pub max_attempts: u32,
    /// Error text of the last failed attempt.
    pub last_error: Option<String>,
    /// The last few failed attempts (up to five), oldest first.
    pub errors: Vec<crate::values::error_history::FailedAttempt>,
    /// The payload.
    pub payload: Vec<u8>,
    /// The whole payload's length: `payload`'s from [`Queue::get`](crate::Queue::get); a
    /// list or search gives only the first [`BROWSE_PAYLOAD_BYTES`](crate::BROWSE_PAYLOAD_BYTES).
    pub payload_len: usize,
    /// What the payload is.
    pub kind: crate::values::options::PayloadKind,
    /// Its priority ([`SendOptions::priority`](crate::SendOptions::priority)).
    pub priority: u8,
    /// Its group ([`SendOptions::group`](crate::SendOptions::group)), if it has one.
    pub group: Option<String>,
    /// Its deadline ([`SendOptions::ttl`](crate::SendOptions::ttl)), ms since the Unix
    /// epoch: it is never delivered at or after it.
    pub expires_at_ms: Option<u64>,
    /// Debounced ([`OnDuplicate::Debounce`](crate::OnDuplicate::Debounce)): the latest its
    /// due time may be pushed to, ms since the Unix epoch.
    pub debounce_until_ms: Option<u64>,
    /// In flight: when the lease ends, ms since the Unix epoch.
    pub lease_deadline_ms: Option<u64>,
    /// Dead: when it died, ms since the Unix epoch.
    pub died_at_ms: Option<u64>,
    /// The W3C `traceparent` it carries ([`SendOptions::traceparent`](crate::SendOptions::traceparent),
    /// or its send span's with tracing on), from [`Queue::get`](crate::Queue::get) only.
    pub traceparent: Option<String>,
    /// Completed ([`State::Completed`]): how and when it ended. Such a message keeps no
    /// payload, priority or group.
    pub completion: Option<crate::values::retention::Completion>,
    /// Its payload is stored sealed ([`Setting::Encryption`](crate::Setting::Encryption)):
    /// opened or not, and with which key.
    pub sealed: Option<Sealed>,
}

/// A payload stored sealed ([`Setting::Encryption`](crate::Setting::Encryption)), as a
/// reader was given it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Sealed {
    /// Opened with this client's key of this id: the payload given is the one sent.
    Opened {
        /// The key's id.
        key: String,
    },
    /// Not opened, as a listing or a search never opens one (it does not search it either):
    /// the payload given is empty.
    Listed {
        /// The key's id.
        key: String,
    },
    /// This client could not open it: the payload given is empty.
    Undecryptable(crate::values::sealing::Undecryptable),
}

impl Sealed {
    /// The id of the key that sealed it, if known.
    pub fn key(&self) -> Option<&str> {
        match self {
            Sealed::Opened { key } | Sealed::Listed { key } => Some(key),
            Sealed::Undecryptable(crate::values::sealing::Undecryptable::NoKey(key))
            | Sealed::Undecryptable(crate::values::sealing::Undecryptable::Rejected(key)) => {
                Some(key)
            }
            Sealed::Undecryptable(_) => None,
        }
    }
}

/// Counts of a queue, taken atomically (per partition, on a queue of several).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Waiting for their due time.
    pub delayed: u64,
    /// Due and not yet claimed.
    pub ready: u64,
    /// Held under a lease.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// How long the oldest due-but-unclaimed message has been due, in ms (0 when none).
    pub oldest_ready_lag_ms: u64,
    /// Of those in flight, held past the end of their lease: their consumer died or stalled,
    /// and the next claim of any consumer takes them back. While no consumer runs they stay
    /// here, with ready 0 and a lag of 0, so this (and [`oldest_overdue_ms`](Self::oldest_overdue_ms))
    /// is what shows work stuck behind dead workers.
    pub overdue: u64,
    /// How long ago the oldest overdue lease ended, in ms (0 when none).
    pub oldest_overdue_ms: u64,
    /// Paused ([`Queue::pause`](crate::Queue::pause)): nothing is delivered. On a queue of
    /// several partitions, true when any of them is (a pause that failed part-way).
    pub paused: bool,
    /// How long a caller id stays reserved after its message is acked, cancelled or purged
    /// ([`Setting::IdempotencyWindow`](crate::Setting::IdempotencyWindow)); zero when only
    /// while the message exists.
    pub idempotency_window: std::time::Duration,
    /// The queue's rate limit ([`Setting::RateLimit`](crate::Setting::RateLimit)).
    pub rate_limit: Option<RateLimit>,
    /// Delivered by push ([`Setting::PushDelivery`](crate::Setting::PushDelivery)).
    pub push: bool,
    /// The data format of the queue (the oldest of its partitions'; see
    /// [`Queue::data_format`](crate::Queue::data_format) for each, and
    /// [`DATA_FORMAT`](crate::DATA_FORMAT) for the newest this delayq reads).
    pub data_format: u32,
    /// Groups with messages pending or in flight
    /// ([`SendOptions::group`](crate::SendOptions::group)).
    pub groups: u64,
    /// At most this many messages of one group in flight at once
    /// ([`Setting::GroupConcurrency`](crate::Setting::GroupConcurrency)); None: no limit.
    pub group_concurrency: Option<u32>,
    /// Each group's rate limit, unless it has its own
    /// ([`Setting::GroupRateLimit`](crate::Setting::GroupRateLimit)); None: no limit.
    pub group_rate_limit: Option<RateLimit>,
    /// How late a message without a deadline of its own may be delivered
    /// ([`Setting::DefaultTtl`](crate::Setting::DefaultTtl)); None: no limit.
    pub default_ttl: Option<std::time::Duration>,
    /// Expired messages are dropped rather than dead-lettered
    /// ([`Setting::OnExpire`](crate::Setting::OnExpire)).
    pub drop_expired: bool,
    /// Payloads sent are sealed ([`Setting::Encryption`](crate::Setting::Encryption)).
    pub encrypted: bool,
    /// Sends due further out than this are refused
    /// ([`Setting::MaxDelay`](crate::Setting::MaxDelay)); None: no limit of the queue's own.
    pub max_delay: Option<std::time::Duration>,
    /// Final records of ended messages kept ([`State::Completed`]).
    pub completed: u64,
    /// How long and how many final records it keeps
    /// ([`Setting::RetainCompleted`](crate::Setting::RetainCompleted)); None: none.
    pub retain_completed: Option<crate::values::retention::Retention>,
    /// Entries kept in the queue's event streams ([`Queue::events`](crate::Queue::events)):
    /// one event each, or up to 100 packed.
    pub events: u64,
    /// How many entries each partition keeps, about
    /// ([`Setting::Events`](crate::Setting::Events)); None: the queue records none.
    pub events_kept: Option<u64>,
}

impl Stats {
    /// Messages the queue holds: pending (delayed and ready), in flight and dead.
    pub fn held(&self) -> u64 {
        self.delayed + self.ready + self.in_flight + self.dead
    }
}

/// At most `per_second` deliveries per second from a queue, across all its consumers, with
/// up to `burst` at once after a quiet spell (a token bucket, decided by the server's clock
/// inside each claim).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    /// Deliveries per second (at least 1).
    pub per_second: u32,
    /// Most deliveries at once (at least 1).
    pub burst: u32,
}

/// How a failed delivery ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NackOutcome {
    /// Scheduled for another attempt.
    Retry,
    /// That was the last attempt: the message is now a dead letter.
    Dead,
    /// Its retry would have started at or after its deadline
    /// ([`SendOptions::ttl`](crate::SendOptions::ttl)): it expired instead, a dead letter
    /// with the error `expired`, or gone if the queue drops expired messages
    /// ([`Setting::OnExpire`](crate::Setting::OnExpire)).
    Expired,
    /// A newer message took its caller id while it was in flight
    /// ([`IfInFlight::SendAnother`](crate::IfInFlight::SendAnother)): it ended here,
    /// neither retried nor a dead letter.
    Superseded,
}

/// What comes after a failed attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Next {
    /// Another attempt, after the message's backoff; a dead letter after its last attempt.
    #[default]
    Backoff,
    /// Another attempt after this long (an upstream said "try again in 90 s"); a dead letter
    /// after its last attempt.
    After(std::time::Duration),
    /// A dead letter now, whatever attempts are left: the failure is permanent (a malformed
    /// order id will not parse on the next attempt either).
    Dead,
}

/// Changes a failure makes to its message, applied in the same script call as the failure
/// (with the lease checked): the payload of the attempts that follow, and how many attempts
/// are allowed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Amend {
    /// The payload of the next attempts (and of the dead letter) instead of the current one.
    pub payload: Option<Vec<u8>>,
    /// Added to the attempts allowed (negative: fewer); the result is kept between the
    /// attempts made so far (none left: a dead letter now) and 65,535.
    pub extra_attempts: i32,
}

impl Amend {
    /// Replaces the payload of the attempts that follow.
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(payload.into());
        self
    }

    /// Changes the attempts allowed by `n`.
    pub fn extra_attempts(mut self, n: i32) -> Self {
        self.extra_attempts = n;
        self
    }
}

/// One dead letter, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLetter {
    /// The id.
    pub id: String,
    /// When it died, ms since the Unix epoch.
    pub died_at_ms: u64,
    /// Deliveries it had.
    pub attempts: u32,
    /// Deliveries it was allowed.
    pub max_attempts: u32,
    /// Error text of its last attempt.
    pub last_error: Option<String>,
    /// Its last few failed attempts (up to five), oldest first.
    pub errors: Vec<crate::values::error_history::FailedAttempt>,
    /// The payload.
    pub payload: Vec<u8>,
    /// What the payload is.
    pub kind: crate::values::options::PayloadKind,
    /// Its priority, which a requeue keeps.
    pub priority: u8,
    /// Its payload is stored sealed: opened or not, and with which key.
    pub sealed: Option<Sealed>,
}

/// A message that became a dead letter, as the call that made it so reports it: each death
/// is reported once, to the one caller whose script call caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeadLettered {
    /// Its queue.
    pub queue: crate::values::names::QueueName,
    /// Its id, under which the dead letters hold it.
    pub id: String,
    /// The error of its last attempt.
    pub error: String,
}
