//! A delivery: a message handed to one consumer under a lease, with what that consumer
//! needs to settle it (its lease token and sequence number).

use std::time::Duration;

use tokio::time::Instant;

use crate::values::names::QueueName;
use crate::values::options::PayloadKind;

/// A message handed to a consumer under a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Delivery {
    /// The queue it came from.
    pub queue: QueueName,
    /// The message id.
    pub id: String,
    /// The payload, unchanged.
    pub payload: Vec<u8>,
    /// What the payload is, as the sender said.
    pub kind: PayloadKind,
    /// How long a worker's handler may run on it, if the sender said (in place of the
    /// worker's own timeout).
    pub handler_timeout: Option<Duration>,
    /// Its priority ([`SendOptions::priority`](crate::SendOptions::priority)).
    pub priority: u8,
    /// Its group ([`SendOptions::group`](crate::SendOptions::group)), if it has one.
    pub group: Option<String>,
    /// Its deadline ([`SendOptions::ttl`](crate::SendOptions::ttl)), ms since the Unix
    /// epoch: a handler still running then may find its retry expired.
    pub expires_at_ms: Option<u64>,
    /// The W3C `traceparent` it was sent with
    /// ([`SendOptions::traceparent`](crate::SendOptions::traceparent)): the handler's work
    /// is a child of the span that sent it.
    pub traceparent: Option<String>,
    /// Which delivery this is, counting from 1.
    pub attempt: u32,
    /// When the message was due, ms since the Unix epoch (server clock).
    pub due_ms: u64,
    /// When the lease ends, ms since the Unix epoch (server clock).
    pub lease_deadline_ms: u64,
    /// When the lease ends by this process's clock, judged from the moment the claim (or
    /// the last extend) was *sent*: never later than the lease Redis holds, however late
    /// the reply arrived.
    pub(crate) expires: Instant,
    /// Identifies this delivery; a stale holder's token no longer matches.
    pub(crate) token: u64,
    /// Names the message in flight (its sequence number, fixed for its life).
    pub(crate) seq: [u8; 6],
    /// Whether the id is indexed (caller-given or moved) rather than generated.
    pub(crate) explicit_id: bool,
    /// Its stored payload is sealed (`payload` is opened): a new payload for its next
    /// attempts is sealed too.
    pub(crate) sealed: bool,
}

impl Delivery {
    /// The lease token of this delivery.
    pub fn token(&self) -> u64 {
        self.token
    }

    /// How much of the lease is surely left: measured on this host from when the claim (or
    /// the last successful extend) was sent, so it never overstates what Redis grants. Zero
    /// once it has passed; then the message may already be with another consumer and should
    /// not be processed (it will be delivered again).
    pub fn lease_remaining(&self) -> Duration {
        self.expires.saturating_duration_since(Instant::now())
    }

    /// True once [`lease_remaining`](Self::lease_remaining) is zero.
    pub fn lease_expired(&self) -> bool {
        Instant::now() >= self.expires
    }

    /// A copy without the payload: all that ack, nack and extend need.
    pub(crate) fn without_payload(&self) -> Delivery {
        Delivery {
            queue: self.queue.clone(),
            id: self.id.clone(),
            payload: Vec::new(),
            kind: self.kind,
            handler_timeout: self.handler_timeout,
            priority: self.priority,
            group: self.group.clone(),
            expires_at_ms: self.expires_at_ms,
            traceparent: self.traceparent.clone(),
            attempt: self.attempt,
            due_ms: self.due_ms,
            lease_deadline_ms: self.lease_deadline_ms,
            expires: self.expires,
            token: self.token,
            seq: self.seq,
            explicit_id: self.explicit_id,
            sealed: self.sealed,
        }
    }
}
