//! How a recurring schedule's ticks fire, beyond their times ([`Firing`]): a jitter, which
//! spreads the messages of many schedules that share a time (every hour on the hour) over
//! a window after it, the same for every scheduler; and what a tick does while the
//! message of the tick before is still pending or in flight ([`Overlap`]).

use std::time::Duration;

use crate::values::error::InvalidInput;

/// How long before its tick a scheduler sends a tick's message, unless told otherwise
/// ([`Scheduler::lead`](crate::Scheduler::lead)): a jitter and this lead together must fit
/// in the queue's max delay.
pub const DEFAULT_LEAD: Duration = Duration::from_secs(1);

/// Longest [`Firing::jitter`].
pub const MAX_JITTER: Duration = Duration::from_secs(24 * 3600);

/// How a schedule's ticks fire ([`Schedules::put_with`](crate::Schedules::put_with)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Firing {
    /// Each tick's message is due up to this long after its tick, by an offset that follows
    /// from the schedule's name and the tick ([`tick_jitter`]): every scheduler sends the
    /// same. Up to [`MAX_JITTER`]; None: due at the tick.
    pub jitter: Option<Duration>,
    /// What a tick does while the message of the last tick sent is still pending or in
    /// flight.
    pub overlap: Overlap,
}

/// What a tick does while the message of the last tick sent is still pending or in flight.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Overlap {
    /// Fires all the same: one message per tick, whatever became of the one before.
    #[default]
    Allow,
    /// Is skipped: no new message while the last one waits or runs (a report that takes
    /// longer than its period does not pile up). Checked when the tick is sent, so a tick
    /// sent is one whose predecessor had ended.
    Skip,
}

impl Overlap {
    /// `allow` or `skip`.
    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Allow => "allow",
            Overlap::Skip => "skip",
        }
    }
}

impl std::str::FromStr for Overlap {
    type Err = InvalidInput;

    fn from_str(s: &str) -> Result<Self, InvalidInput> {
        match s {
            "allow" => Ok(Overlap::Allow),
            "skip" => Ok(Overlap::Skip),
            other => Err(InvalidInput::Option(format!(
                "overlap is allow or skip, not {other:?}"
            ))),
        }
    }
}

impl Firing {
    /// Checks it.
    pub(crate) fn check(self) -> Result<(), InvalidInput> {
        match self.jitter {
            Some(j) if j.is_zero() || j > MAX_JITTER => Err(InvalidInput::Option(format!(
                "a schedule's jitter is 1 ms to {} hours, not {j:?}",
                MAX_JITTER.as_secs() / 3600
            ))),
            _ => Ok(()),
        }
    }

    /// The schedule hash's fields that hold it (absent ones are the defaults).
    pub(crate) fn fields(self) -> Vec<(&'static str, Vec<u8>)> {
        let mut out = Vec::new();
        if let Some(j) = self.jitter {
            out.push(("jitter_ms", j.as_millis().to_string().into_bytes()));
        }
        if self.overlap == Overlap::Skip {
            out.push(("overlap", b"skip".to_vec()));
        }
        out
    }

    /// As the schedule hash holds it: `jitter_ms` and `overlap`, each text or absent.
    pub(crate) fn from_fields(
        jitter_ms: Option<&[u8]>,
        overlap: Option<&[u8]>,
    ) -> Result<Firing, String> {
        let jitter = match jitter_ms {
            None => None,
            Some(ms) => Some(Duration::from_millis(
                std::str::from_utf8(ms)
                    .ok()
                    .and_then(|t| t.parse().ok())
                    .ok_or("jitter_ms is not a number")?,
            )),
        };
        let overlap = match overlap {
            None => Overlap::Allow,
            Some(text) => std::str::from_utf8(text)
                .map_err(|_| "overlap is not text".to_owned())?
                .parse()
                .map_err(|e: InvalidInput| e.to_string())?,
        };
        Ok(Firing { jitter, overlap })
    }
}

/// How long after tick `tick_ms` of schedule `name` its message is due, with a jitter of
/// up to `jitter`: a hash (FNV-1a) of the name and the tick, so every scheduler, on any
/// host, reckons the same, and the ticks of one schedule spread over the window.
pub fn tick_jitter(name: &str, tick_ms: u64, jitter: Duration) -> Duration {
    let span = jitter.as_millis() as u64;
    if span == 0 {
        return Duration::ZERO;
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in name.bytes().chain([b':']).chain(tick_ms.to_be_bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    Duration::from_millis(hash % (span + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ticks_jitter_is_the_same_every_time_and_within_its_window() {
        let window = Duration::from_secs(30);
        let offsets: Vec<_> = (0..100u64)
            .map(|i| tick_jitter("nightly", i * 3_600_000, window))
            .collect();
        assert!(offsets.iter().all(|d| *d <= window));
        assert_eq!(offsets[7], tick_jitter("nightly", 7 * 3_600_000, window));
        let distinct: std::collections::HashSet<_> = offsets.iter().collect();
        assert!(distinct.len() > 50, "ticks spread over the window");
        assert_ne!(
            tick_jitter("a", 0, window),
            tick_jitter("b", 0, window),
            "schedules that share a tick spread too"
        );
    }

    #[test]
    fn a_firing_reads_back_from_its_fields() {
        let firing = Firing {
            jitter: Some(Duration::from_secs(5)),
            overlap: Overlap::Skip,
        };
        let fields = firing.fields();
        let get = |name: &str| {
            fields
                .iter()
                .find(|(f, _)| *f == name)
                .map(|(_, v)| v.as_slice())
        };
        assert_eq!(
            Firing::from_fields(get("jitter_ms"), get("overlap")),
            Ok(firing)
        );
        assert_eq!(Firing::from_fields(None, None), Ok(Firing::default()));
        assert!(Firing {
            jitter: Some(Duration::ZERO),
            ..firing
        }
        .check()
        .is_err());
    }
}
