//! Where a message is in its life: delayed, ready, in flight, dead, or completed.

use std::fmt;
use std::str::FromStr;

/// Where a message is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum State {
    /// Waiting for its due time.
    Delayed,
    /// Due, waiting for a consumer.
    Ready,
    /// Held by a consumer under a lease.
    InFlight,
    /// Out of attempts; kept in the dead letters until requeued or purged.
    Dead,
    /// Ended (acked, cancelled, expired, or dead and purged) and gone, but the queue
    /// retains its final record ([`Setting::RetainCompleted`](crate::Setting::RetainCompleted)).
    Completed,
}

impl State {
    /// The name used in replies and logs: `delayed`, `ready`, `in_flight`, `dead`,
    /// `completed`.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Delayed => "delayed",
            State::Ready => "ready",
            State::InFlight => "in_flight",
            State::Dead => "dead",
            State::Completed => "completed",
        }
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A state by its name ([`State::as_str`]); the error says what was given.
impl FromStr for State {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "delayed" => Ok(State::Delayed),
            "ready" => Ok(State::Ready),
            "in_flight" => Ok(State::InFlight),
            "dead" => Ok(State::Dead),
            "completed" => Ok(State::Completed),
            other => Err(format!("unknown state {other:?}")),
        }
    }
}
