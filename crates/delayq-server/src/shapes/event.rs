//! An event as JSON: one shape for the API's pages, its SSE stream, the dashboard's feed
//! and the webhooks' requests.

use delayq::Event;
use serde::Serialize;
use utoipa::ToSchema;

/// One change of a message's state.
#[derive(Serialize, ToSchema)]
pub struct EventOut {
    /// sent, delivered, acked, retry, released, dead, expired, superseded, cancelled,
    /// rescheduled, requeued or purged.
    pub kind: String,
    /// The message's id.
    pub id: String,
    /// When, by the Redis server's clock (ms since the Unix epoch).
    pub at_ms: u64,
    /// Of a delivery, its number; of a retry, death or expiry, the attempts made.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// When the message is due: of a send, a retry, a reschedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub due_ms: Option<u64>,
    /// The error that ended an attempt (its first 200 bytes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// replaced, superseded (a send that took a message's id) or dropped (an expired
    /// message gone rather than dead).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// Where a reader that saw this event goes on from (`from=`, or `Last-Event-ID`).
    pub cursor: String,
}

impl From<Event> for EventOut {
    fn from(e: Event) -> Self {
        EventOut {
            kind: e.kind.as_str().to_owned(),
            cursor: e.cursor.to_string(),
            id: e.id,
            at_ms: e.at_ms,
            attempt: e.attempt,
            due_ms: e.due_ms,
            error: e.error,
            detail: e.detail,
        }
    }
}
