//! Failures and what comes after them. A handler may return any `Display` error (a failed
//! attempt, retried by the message's backoff); returning a [`Failure`] instead lets it
//! choose: retry after a given time, or a dead letter now. A failure hook
//! ([`WorkerBuilder::on_failure`](super::WorkerBuilder::on_failure)) then sees every failed
//! attempt and may overrule that, replace the payload or change the attempts allowed
//! ([`Verdict`]); all of it is applied in the one script call that records the failure.

use std::fmt;
use std::time::Duration;

use std::sync::Arc;

use crate::values::delivery::Delivery;
use crate::values::message::{Amend, DeadLettered, Next};

/// A handler's error with what should come next.
///
/// ```
/// use std::time::Duration;
/// use delayq::worker::Failure;
///
/// let permanent = Failure::dead("order id is malformed");
/// let throttled = Failure::retry_after(Duration::from_secs(90), "upstream said 429");
/// assert_eq!(permanent.to_string(), "order id is malformed");
/// # let _ = throttled;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    error: String,
    next: Next,
}

impl Failure {
    /// Retried by the message's backoff, as any other error would be.
    pub fn retry(error: impl fmt::Display) -> Self {
        Failure {
            error: error.to_string(),
            next: Next::Backoff,
        }
    }

    /// Retried after `after` instead of by the backoff (a dead letter after the last attempt).
    pub fn retry_after(after: Duration, error: impl fmt::Display) -> Self {
        Failure {
            error: error.to_string(),
            next: Next::After(after),
        }
    }

    /// A dead letter now, whatever attempts are left.
    pub fn dead(error: impl fmt::Display) -> Self {
        Failure {
            error: error.to_string(),
            next: Next::Dead,
        }
    }

    /// What it asks for.
    pub fn next(&self) -> Next {
        self.next
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.error)
    }
}

impl std::error::Error for Failure {}

/// One failed attempt, as a failure hook sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct FailedDelivery<'a> {
    /// The delivery, with its payload; `attempt` says which attempt failed.
    pub delivery: &'a Delivery,
    /// What went wrong (a handler error, a panic, a timeout).
    pub error: &'a str,
    /// What comes next unless the hook says otherwise.
    pub next: Next,
}

/// What a failure hook decides. The default leaves everything as it is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// What comes next instead (`None`: as the failure said).
    pub next: Option<Next>,
    /// Changes to the message for the attempts that follow.
    pub amend: Amend,
}

impl Verdict {
    /// Leaves the failure as it is.
    pub fn keep() -> Self {
        Verdict::default()
    }

    /// Sends the message to the dead letters now.
    pub fn dead() -> Self {
        Verdict::default().then(Next::Dead)
    }

    /// Chooses what comes next.
    pub fn then(mut self, next: Next) -> Self {
        self.next = Some(next);
        self
    }

    /// Replaces the payload of the attempts that follow.
    pub fn payload(mut self, payload: impl Into<Vec<u8>>) -> Self {
        self.amend = self.amend.payload(payload);
        self
    }

    /// Changes the attempts allowed by `n` (negative: fewer).
    pub fn extra_attempts(mut self, n: i32) -> Self {
        self.amend = self.amend.extra_attempts(n);
        self
    }
}

/// A worker's failure hook.
pub(crate) type FailureHook = Arc<dyn Fn(&FailedDelivery<'_>) -> Verdict + Send + Sync>;

pub(crate) type DeadLetterHook = Arc<dyn Fn(&DeadLettered) + Send + Sync>;

/// Tells the dead-letter hook, if any, of a death; a hook that panics is logged, nothing more.
pub(crate) fn report_dead(hook: Option<&DeadLetterHook>, dead: &DeadLettered) {
    let Some(hook) = hook else { return };
    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| hook(dead))).is_err() {
        tracing::error!(queue = %dead.queue, id = %dead.id, "dead-letter hook panicked");
    }
}
