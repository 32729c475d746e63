//! Completed retention ([`Setting::RetainCompleted`](crate::Setting::RetainCompleted)): a
//! queue that retains keeps the final record of each message that ended (acked, cancelled,
//! expired, dead) for a while, so that [`Queue::get`](crate::Queue::get) answers "did it
//! run, and when?" after the message is gone. The scripts' retention helpers keep the records;
//! this module says what a setting may be and takes a record apart (`by_id.rs` answers
//! with it).

use std::time::Duration;

use crate::values::error::{Error, InvalidInput, Result};

/// How long, and how many, final records a queue keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention {
    /// Each record is kept this long after its message ended: 1 s to [`MAX_RETENTION`].
    pub keep_for: Duration,
    /// At most this many records per partition, the oldest dropped first: 1 to
    /// [`MAX_RETAINED`].
    pub max: u32,
}

/// Longest [`Retention::keep_for`].
pub const MAX_RETENTION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Most [`Retention::max`].
pub const MAX_RETAINED: u32 = 10_000_000;

impl Retention {
    /// The control fields it writes (`retain_ms`, `retain_max`).
    pub(crate) fn fields(self) -> Result<Vec<(&'static str, String)>> {
        if self.keep_for < Duration::from_secs(1) || self.keep_for > MAX_RETENTION {
            return Err(InvalidInput::Option(format!(
                "completed messages are kept 1 s to {} days, not {:?}",
                MAX_RETENTION.as_secs() / 86_400,
                self.keep_for
            ))
            .into());
        }
        if self.max == 0 || self.max > MAX_RETAINED {
            return Err(InvalidInput::Option(format!(
                "at most 1 to {MAX_RETAINED} completed messages are kept, not {}",
                self.max
            ))
            .into());
        }
        Ok(vec![
            ("retain_ms", self.keep_for.as_millis().to_string()),
            ("retain_max", self.max.to_string()),
        ])
    }

    /// As the control hash holds it (`retain_ms`, `retain_max`; '' when unset), if it does.
    pub(crate) fn from_fields(ms: &str, max: &str) -> Option<Retention> {
        Some(Retention {
            keep_for: Duration::from_millis(ms.parse().ok()?),
            max: max.parse().ok()?,
        })
    }
}

/// How a retained message ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Handled: a consumer acked it.
    Acked,
    /// Cancelled while pending.
    Cancelled,
    /// Its deadline passed ([`SendOptions::ttl`](crate::SendOptions::ttl)).
    Expired,
    /// Out of attempts (its dead letter may since have been purged).
    Dead,
}

impl Outcome {
    /// `acked`, `cancelled`, `expired`, `dead`.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Acked => "acked",
            Outcome::Cancelled => "cancelled",
            Outcome::Expired => "expired",
            Outcome::Dead => "dead",
        }
    }
}

/// The final record of a message that ended ([`State::Completed`](crate::State::Completed)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completion {
    /// How it ended.
    pub outcome: Outcome,
    /// When it was sent, ms since the Unix epoch (None: sent before the queue retained).
    pub sent_at_ms: Option<u64>,
    /// When it was first delivered (None: never, or sent before the queue retained).
    pub first_delivered_at_ms: Option<u64>,
    /// When it ended.
    pub finished_at_ms: u64,
}

/// Bytes of a final record before its error history: outcome, attempts, max attempts, four
/// times.
const HEAD: usize = 1 + 2 + 2 + 4 * 8;

/// A final record as the scripts' retention helpers keep it, taken apart.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FinalRecord {
    pub(crate) completion: Completion,
    pub(crate) attempts: u32,
    pub(crate) max_attempts: u32,
    /// The due time of its last delivery (or of the message, if it never was).
    pub(crate) due_ms: u64,
    /// Its error history as the `errors` hash kept it (`error_history.rs`); None: none.
    pub(crate) errors: Option<Vec<u8>>,
}

/// Takes a final record apart.
pub(crate) fn decode(record: &[u8]) -> Result<FinalRecord> {
    let bad = || Error::Protocol(format!("a final record of {} bytes", record.len()));
    let head = record.get(..HEAD).ok_or_else(bad)?;
    let outcome = match head[0] {
        b'a' => Outcome::Acked,
        b'c' => Outcome::Cancelled,
        b'e' => Outcome::Expired,
        b'd' => Outcome::Dead,
        _ => return Err(bad()),
    };
    let u16_at = |i: usize| u32::from(u16::from_be_bytes([head[i], head[i + 1]]));
    let time_at = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&head[i..i + 8]);
        u64::from_be_bytes(b)
    };
    let known = |ms: u64| Some(ms).filter(|ms| *ms > 0);
    let history = &record[HEAD..];
    Ok(FinalRecord {
        completion: Completion {
            outcome,
            sent_at_ms: known(time_at(5)),
            first_delivered_at_ms: known(time_at(13)),
            finished_at_ms: time_at(29),
        },
        attempts: u16_at(1),
        max_attempts: u16_at(3),
        due_ms: time_at(21),
        errors: (!history.is_empty()).then(|| history.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_final_record_reads_back() {
        let mut rec = vec![b'a', 0, 2, 0, 5];
        for t in [1_000u64, 0, 3_000, 4_000] {
            rec.extend_from_slice(&t.to_be_bytes());
        }
        let fin = decode(&rec).expect("well formed");
        assert_eq!((fin.attempts, fin.max_attempts, fin.due_ms), (2, 5, 3_000));
        assert_eq!(fin.errors, None);
        let done = fin.completion;
        assert_eq!(done.outcome, Outcome::Acked);
        assert_eq!(
            (
                done.sent_at_ms,
                done.first_delivered_at_ms,
                done.finished_at_ms
            ),
            (Some(1_000), None, 4_000)
        );
        assert!(decode(&rec[..10]).is_err());
    }

    #[test]
    fn a_retention_is_bounded() {
        let ok = Retention {
            keep_for: Duration::from_secs(3600),
            max: 1000,
        };
        assert!(ok.fields().is_ok());
        assert!(Retention { max: 0, ..ok }.fields().is_err());
        assert!(Retention {
            max: MAX_RETAINED + 1,
            ..ok
        }
        .fields()
        .is_err());
        assert!(Retention {
            keep_for: Duration::from_millis(10),
            ..ok
        }
        .fields()
        .is_err());
    }
}
