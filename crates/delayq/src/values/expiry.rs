//! A message's deadline ([`SendOptions::ttl`](crate::SendOptions::ttl),
//! [`SendOptions::expires_at`](crate::SendOptions::expires_at)): how a send states it and
//! what is checked of it here. The send script writes it into the record by the server's clock;
//! the scripts' expiry helpers say what a deadline does.

use std::time::Duration;

use crate::values::error::InvalidInput;

/// When a message that was not delivered in time expires ([`SendOptions::ttl`],
/// [`SendOptions::expires_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Expiry {
    /// This long after its due time.
    AfterDue(Duration),
    /// At this time, unix ms.
    At(u64),
}

/// Longest [`SendOptions::ttl`].
pub const MAX_TTL: Duration = Duration::from_secs(366 * 24 * 3600);

/// The latest deadline a message may name: the end of the year 9999 (unix ms).
const LAST_DEADLINE_MS: u64 = 253_402_300_799_999;

/// Refuses a ttl (`what` names it) of nothing or over [`MAX_TTL`].
pub(crate) fn check_ttl(ttl: Duration, what: &str) -> Result<(), InvalidInput> {
    if ttl.is_zero() || ttl > MAX_TTL {
        return Err(InvalidInput::Option(format!(
            "{what} is 1 ms to {} days, not {ttl:?}",
            MAX_TTL.as_secs() / 86_400
        )));
    }
    Ok(())
}

impl Expiry {
    /// Checks it against the message's due time, `due_ms` as this host's clock reckons it
    /// (the server's decides in the end: a deadline it finds already passed expires the
    /// message at its first claim).
    pub(crate) fn check(self, due_ms: u64) -> Result<(), InvalidInput> {
        match self {
            Expiry::AfterDue(ttl) => check_ttl(ttl, "a ttl")?,
            Expiry::At(at_ms) => {
                if at_ms > LAST_DEADLINE_MS {
                    return Err(InvalidInput::Option(format!(
                        "expires-at {at_ms} ms is after the year 9999"
                    )));
                }
                if at_ms <= due_ms {
                    return Err(InvalidInput::Option(format!(
                        "expires-at {at_ms} ms is not after the message is due ({due_ms} ms)"
                    )));
                }
            }
        }
        Ok(())
    }

    /// As the send script takes it after the due time and a '/': `<ms after due>` or `@<unix ms>`.
    pub(crate) fn arg(self) -> String {
        match self {
            Expiry::AfterDue(ttl) => ttl.as_millis().to_string(),
            Expiry::At(ms) => format!("@{ms}"),
        }
    }
}
