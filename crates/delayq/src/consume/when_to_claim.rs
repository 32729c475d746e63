//! When a consumer's lane (one partition of one queue, `partition_lane.rs`) claims: the one
//! place that weighs what a lane knows. A claim is owed when
//! 1. a wake-up came (a send, a retry, a requeue made something due sooner), the
//!    subscription was lost, or the last claim's reply was never read ([`woken`]);
//! 2. the last claim said something is due now, or said nothing yet, or its due time is
//!    within the lead (half a claim's round trip, `claim_timing.rs`) ([`Quiet`]);
//!
//! and it goes when
//! 3. the spacing of claims on the partition allows ([`Config::claim_spacing`]);
//! 4. for a claim that a due time brought on, its turn among this client's consumers of the
//!    partition came ([`takes_turn`]), and
//! 5. the news of a claim another of them made meanwhile does not say it is needless
//!    (`claim_news.rs`).
//!
//! The consumer (`consumer.rs`) asks [`owes_claim`] before a round, [`takes_turn`] and
//! [`still_owed`] for each lane it claims from, and [`next_claim_in`] for how long to wait
//! when a round took nothing.
//!
//! [`woken`]: PartitionLane::woken
//! [`takes_turn`]: PartitionLane::takes_turn
//! [`owes_claim`]: PartitionLane::owes_claim
//! [`still_owed`]: PartitionLane::still_owed
//! [`next_claim_in`]: PartitionLane::next_claim_in
//! [`Config::claim_spacing`]: crate::Config::claim_spacing

use std::time::Duration;

use tokio::time::Instant;

use crate::consume::claim_news::Quiet;
use crate::consume::partition_lane::PartitionLane;

/// The least wait before a due time after which consumers of one client claim in turn
/// (claim_news.rs): when messages come due further apart than this, consumers that waited
/// for the same one would each claim it, one of them in vain per consumer and message.
const TURN_AFTER: Duration = Duration::from_millis(1);

impl PartitionLane {
    /// Whether this lane claims in a round at `now` (claims sent `lead` early): one is owed
    /// and the spacing lets it go.
    pub(crate) fn owes_claim(&self, now: Instant, lead: Duration) -> bool {
        self.may_have_due(now, lead) && self.spaced_until(now).is_none()
    }

    /// After the turn was waited for: whether the claim is still owed, or claims made
    /// meanwhile spaced it or made it needless.
    pub(crate) fn still_owed(&mut self, now: Instant, lead: Duration) -> bool {
        !self.take_news(now, lead) && self.spaced_until(now).is_none()
    }

    /// How long until this lane owes a claim, when a round took nothing; `None`: not until
    /// a wake-up.
    pub(crate) fn next_claim_in(&self, now: Instant, lead: Duration) -> Option<Duration> {
        let next = self.due_in(now, lead)?;
        // A claim owed now waits out the spacing of claims on its partition.
        Some(match self.spaced_until(now) {
            Some(until) => next.max(until - now),
            None => next,
        })
    }

    /// Whether a claim here could find something at `now`, with claims sent `lead` early.
    fn may_have_due(&self, now: Instant, lead: Duration) -> bool {
        self.due_in(now, lead) == Some(Duration::ZERO)
    }

    /// How long until a claim here could find something, claims sent `lead` early (zero: it
    /// could now); `None`: nothing is known to come until a wake-up.
    fn due_in(&self, now: Instant, lead: Duration) -> Option<Duration> {
        Some(match self.quiet {
            _ if self.woken() => Duration::ZERO,
            // (A lane still Unknown after a round is one whose first claim the spacing held
            // back.)
            Quiet::Now | Quiet::Unknown => Duration::ZERO,
            // Claim a little ahead so that the request reaches Redis as the message comes
            // due; one that arrives early just comes back with a shorter wait.
            Quiet::Until(at) => at.saturating_duration_since(now + lead),
            Quiet::Idle => return None,
        })
    }

    /// Whether a wake-up came, or the subscription was lost, since the last claim here (or
    /// that claim's reply was never read): a claim is owed now.
    pub(crate) fn woken(&self) -> bool {
        self.unanswered.is_some()
            || self.subscription.is_lost()
            || self.subscription.generation() != self.seen
    }

    /// Until when the next claim here waits for claims on the partition to be spaced
    /// ([`Config::claim_spacing`](crate::Config::claim_spacing), claim_news.rs); `None`: it
    /// may go now. A claim whose reply was lost is repeated at once.
    pub(crate) fn spaced_until(&self, now: Instant) -> Option<Instant> {
        let spacing = self.queue.config().claim_spacing;
        if spacing.is_zero() || self.unanswered.is_some() {
            return None;
        }
        self.news.spaced_until(now, spacing)
    }

    /// Takes in the news of a claim by another consumer of this client since this lane's
    /// last (claim_news.rs): true if it says that no claim is needed now. News older than a
    /// wake-up says nothing: the wake-up may announce what that claim did not see.
    fn take_news(&mut self, now: Instant, lead: Duration) -> bool {
        let Some(news) = self.news.latest() else {
            return false;
        };
        if news.number == self.news_seen
            || news.push != self.push
            || self.unanswered.is_some()
            || news.generation != self.subscription.generation()
        {
            return false;
        }
        self.news_seen = news.number;
        self.seen = news.generation;
        self.quiet = news.quiet;
        self.quiet_since = now;
        !self.may_have_due(now, lead)
    }

    /// Whether the claim about to be made waits for its turn among this client's consumers
    /// of the partition (claim_news.rs): one that a due time brought on after a wait of
    /// [`TURN_AFTER`] or more (no wake-up came, and the last claim said nothing was due for
    /// that long). Shorter gaps are a busy queue's, whose claims go side by side.
    pub(crate) fn takes_turn(&self) -> bool {
        matches!(self.quiet, Quiet::Until(at) if at.saturating_duration_since(self.quiet_since) >= TURN_AFTER)
            && self.unanswered.is_none()
            && self.subscription.generation() == self.seen
    }
}
