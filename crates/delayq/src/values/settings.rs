//! A queue's settings, kept in Redis in each partition's control hash (the control script), so
//! every producer, consumer and server sees the same: how each is checked and written.

use std::time::Duration;

use crate::values::error::{InvalidInput, Result};
use crate::values::message::RateLimit;
use crate::values::options::checked_ms;
use crate::values::retention::Retention;

/// Longest idempotency window ([`Setting::IdempotencyWindow`]).
pub const MAX_IDEMPOTENCY_WINDOW: Duration = Duration::from_secs(366 * 24 * 3600);

/// One setting of a queue, for [`Queue::configure`](crate::Queue::configure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Setting {
    /// Keep a caller id reserved this long after its message is acked, cancelled or its dead
    /// letter purged, so that a producer's late retry of the send is still answered as a
    /// duplicate (nothing written). Zero turns it off: an id is then reserved only while its
    /// message exists (pending, in flight or dead). Applies to messages that go from then on;
    /// each costs an entry of its id in Redis until its window ends. At most
    /// [`MAX_IDEMPOTENCY_WINDOW`].
    IdempotencyWindow(Duration),
    /// At most `per_second` deliveries a second across every consumer and server, with
    /// bursts of up to `burst` (a token bucket kept in Redis and decided inside each claim by
    /// the server's clock); `None` lifts the limit. A consumer that finds no token waits for
    /// the next one, without polling. On a queue of P partitions each partition gets an even
    /// share, `per_second / P` and a burst of `burst / P` rounded up: the whole holds when
    /// messages spread evenly over them (as sends without a caller id do), and a partition
    /// with nothing due leaves its share unused.
    RateLimit(Option<RateLimit>),
    /// The queue is delivered by push (a delayq server calls an HTTP endpoint with each
    /// message): its messages are then claimed only by consumers of a
    /// [`QueueSet::pushing`](crate::QueueSet::pushing) set, never handed to ordinary
    /// consumers, which wait as they would on a paused queue until this is turned off (that
    /// wakes them). Pausing a queue stops push consumers too.
    PushDelivery(bool),
    /// At most `n` messages of one group ([`SendOptions::group`](crate::SendOptions::group))
    /// in flight at once, 1 to [`MAX_GROUP_CONCURRENCY`]; `None` lifts the limit. With 1 a
    /// group is delivered in order: its next message only once the one before is acked,
    /// dead or cancelled (a message waiting for its retry keeps its group's slot, and is
    /// the group's next). A lease that expires passes its slot to the message's retry, so
    /// a worker that dies holds up its group for no longer than its lease.
    GroupConcurrency(Option<u32>),
    /// At most `per_second` deliveries a second of each group, with bursts of up to
    /// `burst` (a token bucket per group, decided inside each claim by the server's clock,
    /// as the queue's [`Setting::RateLimit`] is); `None` lifts it. A group out of tokens
    /// waits outside the rotation for its next one while the other groups are served, and
    /// a group's own limit ([`GroupSettings::rate_limit`](crate::GroupSettings)) takes its
    /// place. Each group lives in one partition, so the limit is not shared out among them.
    GroupRateLimit(Option<RateLimit>),
    /// A message without a deadline of its own ([`SendOptions::ttl`](crate::SendOptions::ttl))
    /// is never delivered more than this long after it is due (its due time, or its retry's):
    /// a claim that finds one later expires it instead. 1 ms to
    /// [`MAX_TTL`](crate::MAX_TTL); `None` lifts it. Costs nothing per message: the claim
    /// compares the due time it reads anyway.
    DefaultTtl(Option<Duration>),
    /// What an expired message becomes: a dead letter with the error `expired` (the
    /// default), or nothing ([`OnExpire::Drop`]).
    OnExpire(OnExpire),
    /// Sends due further out than this (from the Redis server's now) are refused with
    /// [`InvalidInput::Schedule`](crate::InvalidInput::Schedule), nothing written: a guard
    /// against a producer's unit mix-up (seconds for milliseconds) parking messages for
    /// years. 1 ms to [`MAX_DELAY`](crate::values::options::MAX_DELAY); `None` lifts it.
    MaxDelay(Option<Duration>),
    /// Keep the final record of each message that ends (acked, cancelled, expired, dead):
    /// its outcome, attempts, when it was sent, first delivered and finished, and its
    /// errors, so that [`Queue::get`](crate::Queue::get) still answers for it
    /// ([`State::Completed`](crate::State::Completed)) for [`Retention::keep_for`], up to
    /// [`Retention::max`] records per partition (the oldest go first). `None` stops it and
    /// drops the records kept. Only messages sent while it is on know when they were sent
    /// and first delivered.
    RetainCompleted(Option<Retention>),
    /// Record an event for each change of a message's state (sent, delivered, acked,
    /// retried, dead, expired, cancelled, ...), for readers of
    /// [`Queue::events`](crate::Queue::events): each partition keeps about this many
    /// entries of its stream, 1 to [`MAX_EVENTS_KEPT`](crate::MAX_EVENTS_KEPT), the oldest
    /// going first ([`DEFAULT_EVENTS_KEPT`](crate::DEFAULT_EVENTS_KEPT) by default). An
    /// entry is one event, or up to 100 sends, deliveries or acks of one call (a batch's,
    /// a claim's), packed. Each event is written by the script that makes its change, so it
    /// is there if and only if the change is. `None` stops recording and drops the events
    /// kept.
    Events(Option<u64>),
    /// Seal every payload sent from now on with AES-256-GCM before it reaches Redis
    /// (`true`), with the newest key of the sender's [`Config::keys`](crate::Config::keys);
    /// `false` sends new payloads in clear again. Either way a payload sealed before stays
    /// sealed, and opens for a client that holds its key. Needs the queue's data in format
    /// [`ENCRYPTION_FORMAT`](crate::ENCRYPTION_FORMAT) (`delayq format upgrade`) and, to
    /// turn it on, a client with keys. What is stored from before (messages, dead letters,
    /// schedules) is sealed by [`Queue::rotate_keys`](crate::Queue::rotate_keys).
    Encryption(bool),
}

/// What becomes of a message that expired ([`Setting::OnExpire`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnExpire {
    /// A dead letter, with the error `expired`: to inspect, requeue or purge.
    #[default]
    DeadLetter,
    /// Gone, as if acked (counted in `delayq_messages_expired_total`).
    Drop,
}

/// Highest [`Setting::GroupConcurrency`].
pub const MAX_GROUP_CONCURRENCY: u32 = 1_000_000;

impl Setting {
    /// The control hash fields (and values; '' clears one) that this setting writes on each
    /// of `partitions` partitions, or why it is refused.
    pub(crate) fn fields(&self, partitions: u16) -> Result<Vec<(&'static str, String)>> {
        match *self {
            Setting::IdempotencyWindow(window) => {
                let ms = checked_ms(window, "idempotency window")?;
                if window > MAX_IDEMPOTENCY_WINDOW {
                    return Err(InvalidInput::Option(format!(
                        "an idempotency window is at most {} days",
                        MAX_IDEMPOTENCY_WINDOW.as_secs() / 86_400
                    ))
                    .into());
                }
                let value = if ms == 0 {
                    String::new()
                } else {
                    ms.to_string()
                };
                Ok(vec![("window_ms", value)])
            }
            Setting::GroupConcurrency(None) => Ok(vec![("gconc", String::new())]),
            Setting::GroupConcurrency(Some(n)) => {
                if n == 0 || n > MAX_GROUP_CONCURRENCY {
                    return Err(InvalidInput::Option(format!(
                        "a group concurrency is 1 to {MAX_GROUP_CONCURRENCY}, not {n}"
                    ))
                    .into());
                }
                Ok(vec![("gconc", n.to_string())])
            }
            Setting::GroupRateLimit(None) => Ok(vec![("grate", String::new())]),
            Setting::GroupRateLimit(Some(limit)) => {
                check_rate_limit(limit)?;
                Ok(vec![(
                    "grate",
                    format!("{}/{}", limit.per_second, limit.burst),
                )])
            }
            Setting::DefaultTtl(None) => Ok(vec![("ttl_ms", String::new())]),
            Setting::DefaultTtl(Some(ttl)) => {
                crate::values::expiry::check_ttl(ttl, "a default ttl")?;
                Ok(vec![(
                    "ttl_ms",
                    checked_ms(ttl, "default ttl")?.to_string(),
                )])
            }
            Setting::MaxDelay(None) => Ok(vec![("max_delay_ms", String::new())]),
            Setting::MaxDelay(Some(d)) => {
                if d.is_zero() || d > crate::values::options::MAX_DELAY {
                    return Err(InvalidInput::Option(format!(
                        "a queue's max delay is 1 ms to {} days, not {d:?}",
                        crate::values::options::MAX_DELAY.as_secs() / 86_400
                    ))
                    .into());
                }
                Ok(vec![(
                    "max_delay_ms",
                    checked_ms(d, "max delay")?.to_string(),
                )])
            }
            Setting::RetainCompleted(None) => Ok(vec![
                ("retain_ms", String::new()),
                ("retain_max", String::new()),
            ]),
            Setting::RetainCompleted(Some(retention)) => retention.fields(),
            Setting::Events(None) => Ok(vec![("events", String::new())]),
            Setting::Events(Some(kept)) => {
                check_kept(kept)?;
                Ok(vec![("events", kept.to_string())])
            }
            Setting::OnExpire(action) => Ok(vec![(
                "on_expire",
                match action {
                    OnExpire::DeadLetter => String::new(),
                    OnExpire::Drop => "drop".to_owned(),
                },
            )]),
            Setting::PushDelivery(on) => Ok(vec![("push", if on { "1" } else { "" }.to_owned())]),
            Setting::Encryption(on) => Ok(vec![("encrypt", if on { "1" } else { "" }.to_owned())]),
            Setting::RateLimit(None) => Ok(["rate", "burst", "limit"]
                .map(|name| (name, String::new()))
                .to_vec()),
            Setting::RateLimit(Some(limit)) => {
                check_rate_limit(limit)?;
                let share = f64::from(limit.per_second) / f64::from(partitions);
                Ok(vec![
                    ("rate", format!("{share:.6}")),
                    (
                        "burst",
                        limit.burst.div_ceil(u32::from(partitions)).to_string(),
                    ),
                    ("limit", format!("{}/{}", limit.per_second, limit.burst)),
                ])
            }
        }
    }
}

/// Refuses a rate limit of no messages a second, or of no burst.
/// Most stream entries (an event, or up to 100 packed) a partition keeps when a queue
/// records events without saying how many ([`Setting::Events`](crate::Setting::Events)):
/// 20,000 to 2,000,000 events, about 1 MB to 70 MB.
pub const DEFAULT_EVENTS_KEPT: u64 = 20_000;

/// Most stream entries a partition may be told to keep.
pub const MAX_EVENTS_KEPT: u64 = 10_000_000;

/// Checks how many events a partition is told to keep.
pub(crate) fn check_kept(kept: u64) -> Result<(), InvalidInput> {
    if !(1..=MAX_EVENTS_KEPT).contains(&kept) {
        return Err(InvalidInput::Option(format!(
            "a queue keeps 1 to {MAX_EVENTS_KEPT} event entries per partition, not {kept}"
        )));
    }
    Ok(())
}

pub(crate) fn check_rate_limit(limit: RateLimit) -> Result<()> {
    if limit.per_second == 0 || limit.burst == 0 {
        return Err(InvalidInput::Option(
            "a rate limit needs at least 1 per second and a burst of at least 1".into(),
        )
        .into());
    }
    Ok(())
}

/// A rate limit as the control hash keeps it for stats: '<per second>/<burst>' ('' for none).
pub(crate) fn parse_limit(text: &str) -> Option<RateLimit> {
    let (per_second, burst) = text.split_once('/')?;
    Some(RateLimit {
        per_second: per_second.parse().ok()?,
        burst: burst.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_limit_is_shared_evenly_by_the_partitions() {
        let limit = Setting::RateLimit(Some(RateLimit {
            per_second: 100,
            burst: 10,
        }));
        let fields = limit.fields(3).expect("valid");
        assert_eq!(fields[0], ("rate", "33.333333".into()));
        assert_eq!(fields[1], ("burst", "4".into()));
        assert_eq!(
            parse_limit(&fields[2].1),
            Some(RateLimit {
                per_second: 100,
                burst: 10
            })
        );
    }
}
