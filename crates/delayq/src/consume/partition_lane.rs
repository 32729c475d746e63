//! One partition of one queue of a consumer (a *lane*, consumer.rs): what its consumer knows
//! of the partition (the wake-ups heard, what the last claim said of the time before
//! anything comes due, the news of other consumers' claims, claim_news.rs, and the spacing
//! of claims), and its claim, repeated when a reply was lost.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::consume::claim::{self, Claim, ClaimTerms};
use crate::consume::claim_news::{ClaimNews, Quiet};
use crate::handles::queue_core::QueueCore;
use crate::store::keys::Keys;
use crate::store::wakeup::Subscription;
use crate::values::error::Result;
use crate::values::options::{ReceiveOptions, MAX_BATCH};
use crate::values::receipt::Held;

/// One partition of one queue of a consumer.
pub(crate) struct PartitionLane {
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
    /// The claim news of this client's consumers of the partition: the subscription's
    /// (claim_news.rs), taken again with it.
    pub(crate) news: Arc<ClaimNews>,
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

impl PartitionLane {
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
            // A multiple of CLAIM_SPAN, so that each token base + 1 ..= base + max names its
            // claim and place (a claim's lease, prelude.lua), all within 48 bits.
            None => (
                rand::random::<u64>() % (TOKEN_LIMIT / CLAIM_SPAN) * CLAIM_SPAN,
                false,
            ),
        };
        // Set before the call and cleared after its reply is read: a dropped future or an
        // error leaves it set.
        self.unanswered = Some(base);
        let terms = ClaimTerms {
            base,
            repeat,
            remember: self.remember_claims,
            push: self.push,
            look_ahead: self.look_ahead(),
        };
        let claim = claim::from_partition(
            &self.queue,
            &self.keys,
            &self.claim_record,
            options,
            &terms,
            acks,
        )
        .await?;
        self.unanswered = None;
        Ok(claim)
    }

    /// How far ahead of due times this lane's claims take messages
    /// ([`Config::look_ahead`](crate::Config::look_ahead)): none for a consumer made for one
    /// receive, which could not hold what it took ahead past that receive.
    pub(crate) fn look_ahead(&self) -> Duration {
        match self.remember_claims {
            true => self.queue.config().look_ahead,
            false => Duration::ZERO,
        }
    }

    /// The live subscription, renewed if it was lost.
    pub(crate) async fn subscribed(&mut self) -> Result<Arc<Subscription>> {
        if self.subscription.is_lost() {
            self.subscription = self.queue.subscription(&self.keys).await?;
            self.news = ClaimNews::of(&self.subscription);
        }
        Ok(self.subscription.clone())
    }
}

/// Lease tokens are 48-bit.
const TOKEN_LIMIT: u64 = 1 << 48;

/// The step between token bases: above the most one claim takes ([`MAX_BATCH`]), as
/// leases.lua's `claim_leases.SPAN`.
const CLAIM_SPAN: u64 = 1024;
const _: () = assert!(MAX_BATCH < CLAIM_SPAN as usize);
