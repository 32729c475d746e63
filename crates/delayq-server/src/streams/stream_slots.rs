//! How many event streams may be open at once: per token (`Limits::max_event_streams_per_token`)
//! and per server (`Limits::max_event_streams`). A stream holds a connection, a task and a
//! reader's catch-up for as long as its client likes, so beyond either cap a new one is
//! refused with 429 `too_many_streams` instead of opened. A dashboard session counts against
//! the token it logged in with; without tokens, every client counts as one.

use std::sync::Arc;

use axum::http::StatusCode;

use crate::error::ApiError;
use crate::slots::{Full, Slot, SlotCounts};

/// Who holds a stream: a token, or anyone (no tokens).
pub type Holder = Option<crate::auth::TokenId>;

/// The streams open now, by holder.
pub type StreamSlots = SlotCounts<Holder>;

/// One open stream's place, given back when the stream ends.
pub type StreamSlot = Slot<Holder>;

/// A place for one more stream of `holder`, if neither cap is reached (else a 429).
pub fn take(
    slots: &Arc<StreamSlots>,
    holder: Holder,
    per_holder: usize,
    total: usize,
) -> Result<StreamSlot, ApiError> {
    SlotCounts::take(slots, holder, per_holder, Some(total)).map_err(|full| {
        let what = match full {
            Full::Total => format!("this server has {total} event streams open, its most"),
            Full::Key => format!("this token has {per_holder} event streams open, its most"),
        };
        ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_streams",
            format!("{what}: close one, or read pages instead"),
        )
    })
}
