//! A send's upsert options over HTTP (`on_duplicate`, `max_wait`, `if_in_flight`), as the
//! library takes them ([`delayq::OnDuplicate`], [`delayq::IfInFlight`]); the CLI's `send`
//! takes the same.

use std::time::Duration;

use delayq::{IfInFlight, OnDuplicate, SendOptions};
use serde::Deserialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};

/// What a send with a caller id does when a message with that id exists.
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum OnDuplicateArg {
    /// Keep it: the send is a duplicate (200), nothing written. The default.
    Keep,
    /// Replace a pending message: payload, due time and options, same id, starting over.
    Replace,
    /// Replace it, due after the send's delay, but never later than `max_wait` after the
    /// first send of the messages replaced in turn.
    Debounce,
}

/// What a replace or debounce does when the id's message is in flight (never changed).
#[derive(Debug, Clone, Copy, Deserialize, ToSchema, clap::ValueEnum)]
#[serde(rename_all = "snake_case")]
pub enum IfInFlightArg {
    /// Send a second message under the id; the one in flight is superseded (its ack
    /// counts; a failure ends it). The default.
    Send,
    /// Refuse: a duplicate (200), nothing written.
    Refuse,
}

/// The upsert options of a send, checked together: `max_wait` goes with (and only with)
/// `debounce`, `if_in_flight` with `replace` or `debounce`.
#[derive(Debug, Default)]
pub struct UpsertArgs {
    /// Keep (the default), replace or debounce.
    pub on_duplicate: Option<OnDuplicateArg>,
    /// A debounce's max wait.
    pub max_wait: Option<Duration>,
    /// Send another (the default) or refuse, when the message is in flight.
    pub if_in_flight: Option<IfInFlightArg>,
}

impl UpsertArgs {
    /// `options` with these applied; a 400 `invalid_option` for a combination that means
    /// nothing.
    pub fn apply(self, options: SendOptions) -> ApiResult<SendOptions> {
        let bad = |why: &str| ApiError::bad_request("invalid_option", why);
        let on_duplicate = match (self.on_duplicate, self.max_wait) {
            (None | Some(OnDuplicateArg::Keep), None) => OnDuplicate::Keep,
            (Some(OnDuplicateArg::Replace), None) => OnDuplicate::Replace,
            (Some(OnDuplicateArg::Debounce), Some(max_wait)) => OnDuplicate::Debounce { max_wait },
            (Some(OnDuplicateArg::Debounce), None) => {
                return Err(bad("on_duplicate debounce needs max_wait"))
            }
            (_, Some(_)) => return Err(bad("max_wait goes with on_duplicate debounce")),
        };
        let if_in_flight = match self.if_in_flight {
            None => IfInFlight::SendAnother,
            Some(_) if on_duplicate == OnDuplicate::Keep => {
                return Err(bad(
                    "if_in_flight goes with on_duplicate replace or debounce",
                ))
            }
            Some(IfInFlightArg::Send) => IfInFlight::SendAnother,
            Some(IfInFlightArg::Refuse) => IfInFlight::Refuse,
        };
        Ok(options
            .on_duplicate(on_duplicate)
            .if_in_flight(if_in_flight))
    }
}
