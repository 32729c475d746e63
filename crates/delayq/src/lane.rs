//! One partition of one queue of a consumer (a *lane*, consumer.rs): what its consumer knows
//! of the partition (the wake-ups heard, what the last claim said of the time before
//! anything comes due, the news of other consumers' claims, claim_news.rs, and the spacing
//! of claims), and its claim, repeated when a reply was lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::claim::{self, Claim};
use crate::claim_news::Quiet;
use crate::error::Result;
use crate::keys::Keys;
use crate::options::{ReceiveOptions, MAX_BATCH};
use crate::queue_core::QueueCore;
use crate::receipt::Held;
use crate::wakeup::Subscription;

/// One partition of one queue of a consumer.
pub(crate) struct Lane {
    pub(crate) queue: Arc<QueueCore>,
    /// The partition's keys.
    pub(crate) keys: Arc<Keys>,
    /// The position of the queue in the consumer's set.
    pub(crate) group: usize,
    /// The partition's index in its queue.
    pub(crate) partition: usize,
    /// This consumer's claim record in Redis: what its last claim took (consumer.rs says why).
    pub(crate) claim_record: String,
    /// The queue's wake-up subscription (shared); renewed once lost.
    pub(crate) subscription: Arc<Subscription>,
    /// Wake-ups heard before the last claim was sent.
    pub(crate) seen: u64,
    /// Token base of a claim sent whose reply has not been read: the next claim repeats it.
    pub(crate) unanswered: Option<u64>,
    /// What the last claim said of the time before anything comes due here.
    pub(crate) quiet: Quiet,
    /// The number of the latest claim news this lane took in (claim_news.rs).
    pub(crate) news_seen: u64,
    /// When `quiet` was learned.
    pub(crate) quiet_since: Instant,
    /// Claims for push delivery ([`QueueSet::pushing`](crate::QueueSet::pushing)).
    pub(crate) push: bool,
    /// Whether claims write the claim record, for a repeat by a later `receive`: a
    /// consumer made for one receive never repeats, and leaves no key behind.
    pub(crate) remember_claims: bool,
}

/// The longest a consumer trusts what a claim said of the time before anything comes due
/// or a lease ends. Sends, releases, retries and requeues that make something due sooner
/// wake consumers; what no wake-up announces (data restored from an older snapshot, a step
/// of the server's clock) is seen within this time, as it was when every receive began
/// with a claim and the worker runtime received at least every 5 s.
pub(crate) const RECHECK_AFTER: Duration = Duration::from_secs(5);

impl Lane {
    /// Whether a claim here could find something at `now`, with claims sent `lead` early.
    pub(crate) fn may_have_due(&self, now: Instant, lead: Duration) -> bool {
        self.woken()
            || match self.quiet {
                Quiet::Unknown | Quiet::Now => true,
                Quiet::Until(at) => now + lead >= at,
                Quiet::Idle => false,
            }
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
        self.subscription.news().spaced_until(now, spacing)
    }

    /// Takes in the news of a claim by another consumer of this client since this lane's
    /// last (claim_news.rs): true if it says that no claim is needed now. News older than a
    /// wake-up says nothing: the wake-up may announce what that claim did not see.
    pub(crate) fn take_news(&mut self, now: Instant, lead: Duration) -> bool {
        let Some(news) = self.subscription.news().latest() else {
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

    /// Whether the claim about to be made is one that a due time brought on after a wait
    /// of [`TURN_AFTER`] or more: no wake-up came, and the last claim said nothing was due
    /// for that long. Shorter gaps are a busy queue's, whose claims go side by side.
    pub(crate) fn waits_on_due_time(&self) -> bool {
        matches!(self.quiet, Quiet::Until(at) if at.saturating_duration_since(self.quiet_since) >= TURN_AFTER)
            && self.unanswered.is_none()
            && self.subscription.generation() == self.seen
    }

    /// One claim, first acking `acks` (deliveries of this partition); repeats the last one
    /// instead if its reply was never read.
    pub(crate) async fn claim(
        &mut self,
        options: &ReceiveOptions,
        acks: &[impl Held],
    ) -> Result<Claim> {
        self.seen = self.subscribed().await?.generation();
        let (base, repeat) = match self.unanswered {
            Some(base) => (base, true),
            // Tokens base + 1 ..= base + max must stay within 48 bits.
            None => (
                rand::random::<u64>() % (TOKEN_LIMIT - MAX_BATCH as u64),
                false,
            ),
        };
        // Set before the call and cleared after its reply is read: a dropped future or an
        // error leaves it set.
        self.unanswered = Some(base);
        let claim = claim::from_partition(
            &self.queue,
            &self.keys,
            &self.claim_record,
            options,
            (base, repeat, self.remember_claims),
            self.push,
            acks,
        )
        .await?;
        self.unanswered = None;
        Ok(claim)
    }

    /// The live subscription, renewed if it was lost.
    pub(crate) async fn subscribed(&mut self) -> Result<Arc<Subscription>> {
        if self.subscription.is_lost() {
            self.subscription = self.queue.subscription(&self.keys).await?;
        }
        Ok(self.subscription.clone())
    }
}

/// The least wait before a due time after which consumers of one client claim in turn
/// (claim_news.rs): when messages come due further apart than this, consumers that waited
/// for the same one would each claim it, one of them in vain per consumer and message.
const TURN_AFTER: Duration = Duration::from_millis(1);

/// Lease tokens are 48-bit.
const TOKEN_LIMIT: u64 = 1 << 48;
