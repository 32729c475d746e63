//! What claims on one partition taught this client's consumers, shared among them.
//!
//! A claim's reply says when the next message comes due ([`Quiet`]). Consumers of one
//! client that wait on the same partition (an HTTP server's concurrent long-polls, several
//! workers in one process) would otherwise each learn it with a claim of their own: all of
//! them wake at that due time and claim, and one gets the message while the rest come back
//! empty, a call each. So a claim that a due time brings on waits for its turn (one at a
//! time per partition), and every claim first takes the news of a claim made since its
//! consumer's last: if no wake-up came after that claim and it says nothing is due yet, no
//! claim is needed. Claims for more that is due already (a wake-up, a claim that took all it
//! could) take no turn: they go side by side, as a busy queue needs.
//!
//! The news also say when the latest claim was sent, so that claims on a busy partition are
//! spaced ([`Config::claim_spacing`](crate::Config::claim_spacing)): messages that come due
//! a few microseconds apart are taken by one claim each millisecond rather than by one claim
//! each, every claim costing Redis the same fixed work however few it takes. A claim that
//! took all it could says more is due now: the next goes at once, so a backlog is never
//! spaced.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Mutex as TurnLock, MutexGuard};
use tokio::time::Instant;

use crate::store::wakeup::Subscription;

/// What a consumer knows of a partition's next due time, from the last claim there.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Quiet {
    /// Claim to find out.
    Unknown,
    /// More may be due now: the last claim took all it could.
    Now,
    /// Nothing due (nor any lease ending) before this moment.
    Until(Instant),
    /// Nothing pending or leased at all.
    Idle,
}

/// What a claim learned.
#[derive(Debug, Clone, Copy)]
pub(crate) struct News {
    /// Counts the claims reported here, so a consumer knows which it has seen.
    pub(crate) number: u64,
    /// The wake-ups its consumer had heard when it sent the claim.
    pub(crate) generation: u64,
    /// Whether it was a push delivery's claim: those and the rest see different queues.
    pub(crate) push: bool,
    pub(crate) quiet: Quiet,
}

/// The news of one partition, and its claiming turn.
#[derive(Default)]
pub(crate) struct ClaimNews {
    turn: TurnLock<()>,
    latest: Mutex<Latest>,
}

/// The latest claim's news, and when the latest claim was sent (they differ while a claim
/// is under way).
#[derive(Default)]
struct Latest {
    news: Option<News>,
    sent: Option<Instant>,
}

impl ClaimNews {
    /// The news that the consumers on `subscription`'s partition share.
    pub(crate) fn of(subscription: &Subscription) -> Arc<ClaimNews> {
        subscription.shared()
    }

    /// Waits for this consumer's turn to claim; it lasts as long as the guard.
    pub(crate) async fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// The news of the latest claim, if any.
    pub(crate) fn latest(&self) -> Option<News> {
        self.lock().news
    }

    /// Notes that a claim is being sent now.
    pub(crate) fn sending(&self, now: Instant) {
        self.lock().sent = Some(now);
    }

    /// The earliest moment the next claim may go, `spacing` after the latest was sent;
    /// `None` when it may go now: no claim yet, spacing passed, or the latest claim's news
    /// say more is due already.
    pub(crate) fn spaced_until(&self, now: Instant, spacing: Duration) -> Option<Instant> {
        let latest = self.lock();
        if matches!(
            latest.news,
            Some(News {
                quiet: Quiet::Now,
                ..
            })
        ) {
            return None;
        }
        let at = latest.sent? + spacing;
        (at > now).then_some(at)
    }

    /// Reports what a claim learned; returns its number.
    pub(crate) fn report(&self, generation: u64, push: bool, quiet: Quiet) -> u64 {
        let mut latest = self.lock();
        let number = latest.news.map_or(1, |n| n.number + 1);
        latest.news = Some(News {
            number,
            generation,
            push,
            quiet,
        });
        number
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Latest> {
        // A poisoned lock only means a panic elsewhere while holding it; a copy in and out
        // cannot leave the value half written.
        self.latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
