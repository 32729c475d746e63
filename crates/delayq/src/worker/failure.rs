//! A handler error that says what comes next. A handler may return any `Display` error (a
//! failed attempt, retried by the message's backoff); returning a [`Failure`] instead lets
//! it choose: retry after a given time, or a dead letter now.

use std::fmt;
use std::time::Duration;

use crate::message::Next;

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
