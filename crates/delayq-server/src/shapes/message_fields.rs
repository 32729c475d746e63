//! What a message carries that every answer showing it shows alike (`get`, a delivery, a
//! list's row): its priority, its group and its deadline. A field of this kind added to a
//! message is added here once, with where each answer takes it from.

use delayq::{Delivery, MessageInfo};
use serde::Serialize;
use utoipa::ToSchema;

/// A message's priority, group and deadline, flattened into each answer that shows it.
#[derive(Serialize, ToSchema)]
pub struct MessageFields {
    /// 0 (lowest) to 9 (highest).
    pub priority: u8,
    /// Its group, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// When it can no longer be delivered, ms since the Unix epoch, if it has a deadline.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_at_ms: Option<u64>,
}

impl MessageFields {
    /// As `get` and lists read them.
    pub fn of_message(m: &mut MessageInfo) -> Self {
        MessageFields {
            priority: m.priority,
            group: m.group.take(),
            expires_at_ms: m.expires_at_ms,
        }
    }

    /// As a delivery carries them.
    pub fn of_delivery(d: &mut Delivery) -> Self {
        MessageFields {
            priority: d.priority,
            group: d.group.take(),
            expires_at_ms: d.expires_at_ms,
        }
    }
}
