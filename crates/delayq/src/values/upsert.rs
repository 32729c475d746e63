//! Upserts: what a send with a caller id does when a message with that id already exists
//! ([`SendOptions::on_duplicate`](crate::SendOptions::on_duplicate)). Keeping the existing
//! message is the default (an idempotent send); replacing it and debouncing it write a new
//! message in its place, in the send's one script call, so a claim sees the old message or
//! the new one and never both or neither. The send script says what each meets: a pending
//! message, one in flight, a dead letter, one gone.

use std::time::Duration;

use crate::values::error::InvalidInput;
use crate::values::expiry::MAX_TTL;

/// What a send with a caller id does when a message with that id exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnDuplicate {
    /// Keep the existing message; the send is a duplicate and writes nothing.
    #[default]
    Keep,
    /// Replace a pending message: the send's payload, due time and options take its place
    /// under the same id, starting over (no attempts, no errors).
    Replace,
    /// Replace as [`Replace`](OnDuplicate::Replace) does, but never due later than
    /// `max_wait` after the first send of the messages replaced in turn: a steady stream
    /// of updates, each pushing the due time out by its delay, still fires.
    Debounce {
        /// How far the first send's due time may be pushed out at most: 1 ms to
        /// [`MAX_TTL`].
        max_wait: Duration,
    },
}

/// What a replace or a debounce does when the id's message is in flight: it is never
/// changed (its handler is running).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum IfInFlight {
    /// Send a second message under the same id, after the send's delay. The one in flight
    /// is superseded: its ack still counts, but if it fails (or is released, or its lease
    /// runs out) it ends there, neither retried nor a dead letter, since the newer message
    /// carries what it was for. The two may run at once, unless they share a group of
    /// concurrency 1.
    #[default]
    SendAnother,
    /// Refuse: the send is a duplicate and writes nothing, as with
    /// [`OnDuplicate::Keep`].
    Refuse,
}

impl OnDuplicate {
    /// Checks it; `has_id` says whether the send has a caller id, which an upsert needs.
    pub(crate) fn check(self, has_id: bool) -> Result<(), InvalidInput> {
        if self == OnDuplicate::Keep {
            return Ok(());
        }
        if !has_id {
            return Err(InvalidInput::Option(
                "on-duplicate replace or debounce needs a caller id".into(),
            ));
        }
        if let OnDuplicate::Debounce { max_wait } = self {
            if max_wait < Duration::from_millis(1) || max_wait > MAX_TTL {
                return Err(InvalidInput::Option(format!(
                    "a debounce's max wait is 1 ms to {} days, not {max_wait:?}",
                    MAX_TTL.as_secs() / 86_400
                )));
            }
        }
        Ok(())
    }

    /// As the send script takes it after the due time and a ';' (None for `Keep`).
    pub(crate) fn arg(self, in_flight: IfInFlight) -> Option<String> {
        let refuse = if in_flight == IfInFlight::Refuse {
            "!"
        } else {
            ""
        };
        match self {
            OnDuplicate::Keep => None,
            OnDuplicate::Replace => Some(format!("r{refuse}")),
            OnDuplicate::Debounce { max_wait } => {
                Some(format!("d{}{refuse}", max_wait.as_millis().max(1)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upserts_need_a_caller_id_and_a_bounded_max_wait() {
        assert!(OnDuplicate::Keep.check(false).is_ok());
        assert!(OnDuplicate::Replace.check(false).is_err());
        assert!(OnDuplicate::Replace.check(true).is_ok());
        let debounce = |ms| OnDuplicate::Debounce {
            max_wait: Duration::from_millis(ms),
        };
        assert!(debounce(0).check(true).is_err());
        assert!(debounce(30_000).check(true).is_ok());
        assert!(OnDuplicate::Debounce {
            max_wait: MAX_TTL * 2
        }
        .check(true)
        .is_err());
    }

    #[test]
    fn the_script_argument_names_the_mode_and_a_refusal() {
        assert_eq!(OnDuplicate::Keep.arg(IfInFlight::Refuse), None);
        assert_eq!(
            OnDuplicate::Replace.arg(IfInFlight::SendAnother).as_deref(),
            Some("r")
        );
        let debounce = OnDuplicate::Debounce {
            max_wait: Duration::from_secs(30),
        };
        assert_eq!(debounce.arg(IfInFlight::Refuse).as_deref(), Some("d30000!"));
    }
}
