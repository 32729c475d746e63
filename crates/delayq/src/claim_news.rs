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

use std::sync::Mutex;

use tokio::sync::{Mutex as TurnLock, MutexGuard};
use tokio::time::Instant;

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
    latest: Mutex<Option<News>>,
}

impl ClaimNews {
    /// Waits for this consumer's turn to claim; it lasts as long as the guard.
    pub(crate) async fn turn(&self) -> MutexGuard<'_, ()> {
        self.turn.lock().await
    }

    /// The news of the latest claim, if any.
    pub(crate) fn latest(&self) -> Option<News> {
        *self.lock()
    }

    /// Reports what a claim learned; returns its number.
    pub(crate) fn report(&self, generation: u64, push: bool, quiet: Quiet) -> u64 {
        let mut latest = self.lock();
        let number = latest.map_or(1, |n| n.number + 1);
        *latest = Some(News {
            number,
            generation,
            push,
            quiet,
        });
        number
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<News>> {
        // A poisoned lock only means a panic elsewhere while holding it; a copy in and out
        // cannot leave the value half written.
        self.latest
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
