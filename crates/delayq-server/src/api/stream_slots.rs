//! How many event streams may be open at once: per token (`Limits::max_event_streams_per_token`)
//! and per server (`Limits::max_event_streams`). A stream holds a connection, a task and a
//! reader's catch-up for as long as its client likes, so beyond either cap a new one is
//! refused with 429 `too_many_streams` instead of opened. A dashboard session counts against
//! the token it logged in with; without tokens, every client counts as one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;

use crate::error::ApiError;

/// Who holds a stream: a token (its place in the tokens file), or anyone (no tokens).
pub type Holder = Option<usize>;

/// The streams open now, by holder.
#[derive(Default)]
pub struct StreamSlots(Mutex<HashMap<Holder, usize>>);

/// One open stream's place, given back when dropped (when the stream ends).
pub struct StreamSlot {
    slots: Arc<StreamSlots>,
    holder: Holder,
}

impl StreamSlots {
    /// A place for one more stream of `holder`, if neither cap is reached.
    pub fn take(
        slots: &Arc<StreamSlots>,
        holder: Holder,
        per_holder: usize,
        total: usize,
    ) -> Result<StreamSlot, ApiError> {
        let mut open = slots.0.lock().unwrap_or_else(|p| p.into_inner());
        let all: usize = open.values().sum();
        let mine = open.get(&holder).copied().unwrap_or(0);
        let refused = |what: String| {
            Err(ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                format!("{what}: close one, or read pages instead"),
            ))
        };
        if all >= total {
            return refused(format!(
                "this server has {total} event streams open, its most"
            ));
        }
        if mine >= per_holder {
            return refused(format!(
                "this token has {per_holder} event streams open, its most"
            ));
        }
        open.insert(holder, mine + 1);
        Ok(StreamSlot {
            slots: slots.clone(),
            holder,
        })
    }
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self.slots.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.holder) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.holder);
            }
        }
    }
}
