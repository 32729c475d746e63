//! A handler's hold on a delivery, as the history sees it: recorded when the handler
//! starts, and when it stops, however it stops. A handler future that is dropped (its lease
//! passed, or shutdown cancelled it) records its end from `Drop`, at the moment it stopped.

use std::sync::Arc;

use crate::history::{now_us, Event, Outcome, Payload, Recorder};

/// A running handler's hold.
pub struct Holding {
    recorder: Arc<Recorder>,
    pid: u32,
    id: String,
    token: String,
    done: bool,
}

/// What is known about a delivery when its handler starts.
pub struct Started<'a> {
    pub id: &'a str,
    pub token: String,
    pub attempt: u32,
    pub due_ms: u64,
    pub payload: Payload,
    /// The message's sequence number, if its receipt told it ([`seq_of_receipt`]).
    pub seq: Option<u64>,
    /// When its lease ends as claimed (unix ms, Redis's clock).
    pub lease_deadline_ms: u64,
}

/// The sequence number in a receipt's text: 12 hex digits of lease token, then 12 of
/// sequence (`delayq::Receipt`'s text form).
pub fn seq_of_receipt(receipt: &str) -> Option<u64> {
    receipt
        .get(12..24)
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
}

impl Holding {
    /// Records the start.
    pub fn start(recorder: Arc<Recorder>, started: Started<'_>) -> Holding {
        let pid = std::process::id();
        recorder.record(&Event::Start {
            pid,
            id: started.id.to_owned(),
            n: started.payload.n,
            token: started.token.clone(),
            attempt: started.attempt,
            due_ms: started.due_ms,
            nb_us: started.payload.nb,
            at_us: now_us(),
            seq: started.seq,
            lease_deadline_ms: Some(started.lease_deadline_ms),
        });
        Holding {
            recorder,
            pid,
            id: started.id.to_owned(),
            token: started.token,
            done: false,
        }
    }

    /// Records the end.
    pub fn finish(mut self, outcome: Outcome) {
        self.end(outcome);
    }

    fn end(&mut self, outcome: Outcome) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        self.recorder.record(&Event::End {
            pid: self.pid,
            id: self.id.clone(),
            token: self.token.clone(),
            outcome,
            at_us: now_us(),
        });
    }
}

impl Drop for Holding {
    fn drop(&mut self) {
        self.end(Outcome::Cancelled);
    }
}
