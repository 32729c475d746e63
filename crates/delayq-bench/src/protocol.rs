//! The Agent protocol of WORKLOADS.md: one JSON object per line, events on the agent's
//! stdout (`"ev"` tag) and commands on its stdin (`"cmd"` tag).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::Result;

/// Agent → driver.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "lowercase")]
pub enum Event {
    /// Connected and able to start; `config` is recorded verbatim.
    Ready {
        /// The system under test.
        system: String,
        /// Its version.
        version: String,
        /// What was tuned: bulk API, batch size, concurrency, lease, …
        config: Value,
    },
    /// Consumer: consuming has begun.
    Started {
        /// When, wall clock ms.
        t_ms: f64,
    },
    /// Consumer: deliveries so far (duplicates included), at least every second.
    Progress {
        /// Handler invocations so far.
        total: u64,
        /// When, wall clock ms.
        t_ms: f64,
    },
    /// Producer: the last enqueue was acknowledged.
    Produced(Produced),
    /// Consumer: stopped, deliveries file written.
    Stopped {
        /// Handler invocations in all.
        total: u64,
        /// When, wall clock ms.
        t_ms: f64,
        /// Deliveries whose payload was not one of ours (not in the file). An extension of
        /// the protocol; other agents omit it.
        #[serde(default, skip_serializing_if = "is_zero")]
        bad_payloads: u64,
    },
    /// Fatal error.
    Error {
        /// What went wrong.
        msg: String,
    },
}

/// The `produced` event's fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Produced {
    /// Start of production (the first `t_send`), wall clock ms.
    pub start_ms: f64,
    /// When the last enqueue was acknowledged, wall clock ms.
    pub end_ms: f64,
    /// Messages enqueued.
    pub count: u64,
    /// Earliest due time.
    pub min_due_ms: f64,
    /// Latest due time.
    pub max_due_ms: f64,
    /// W4: the system's own count of pending messages afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_after: Option<u64>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Driver → agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum Command {
    /// Producer: enqueue everything.
    Produce,
    /// Producer: leave.
    Exit,
    /// Consumer: begin consuming.
    Start,
    /// Consumer: stop, write the deliveries file, report, leave.
    Stop,
}

/// One protocol line (without the newline).
pub fn to_line<T: Serialize>(msg: &T) -> Result<String> {
    Ok(serde_json::to_string(msg)?)
}

/// Parses an event line; also returns the raw object, which results record verbatim.
pub fn parse_event(line: &str) -> Result<(Event, Value)> {
    let raw: Value = serde_json::from_str(line)?;
    let event = serde_json::from_value(raw.clone())?;
    Ok((event, raw))
}

/// Parses a command line.
pub fn parse_command(line: &str) -> Result<Command> {
    Ok(serde_json::from_str(line)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_have_the_documented_shape() -> Result<()> {
        let line = to_line(&Event::Progress {
            total: 5,
            t_ms: 1.5,
        })?;
        assert_eq!(line, r#"{"ev":"progress","total":5,"t_ms":1.5}"#);
        let line = to_line(&Event::Produced(Produced {
            start_ms: 1.0,
            end_ms: 2.0,
            count: 3,
            min_due_ms: 4.0,
            max_due_ms: 5.0,
            pending_after: None,
        }))?;
        assert_eq!(
            line,
            r#"{"ev":"produced","start_ms":1.0,"end_ms":2.0,"count":3,"min_due_ms":4.0,"max_due_ms":5.0}"#
        );
        assert_eq!(to_line(&Command::Stop)?, r#"{"cmd":"stop"}"#);
        Ok(())
    }

    #[test]
    fn foreign_agents_parse() -> Result<()> {
        let (ev, raw) = parse_event(r#"{"ev":"stopped","total":7,"t_ms":3}"#)?;
        assert_eq!(
            ev,
            Event::Stopped {
                total: 7,
                t_ms: 3.0,
                bad_payloads: 0
            }
        );
        assert_eq!(raw["total"], 7);
        let (ev, _) = parse_event(
            r#"{"ev":"ready","system":"x","version":"1","config":{"bulk_api":false}}"#,
        )?;
        assert!(matches!(ev, Event::Ready { .. }));
        assert_eq!(parse_command(r#"{"cmd":"produce"}"#)?, Command::Produce);
        assert!(parse_event(r#"{"ev":"nonsense"}"#).is_err());
        Ok(())
    }
}
