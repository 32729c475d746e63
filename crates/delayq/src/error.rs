//! The one error type of the library, classified so that callers can decide what to do
//! (fix their input, drop a stale delivery, or retry later) without matching on strings.

use std::fmt;

/// Everything that can go wrong in delayq.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input was rejected before anything was written.
    #[error("invalid input: {0}")]
    Invalid(#[from] InvalidInput),
    /// The delivery's lease has passed (or it was never this holder's); nothing was changed.
    /// The message may already be with another consumer.
    #[error("lease lost for message {id}")]
    LeaseLost {
        /// The message id.
        id: String,
    },
    /// The message is not in a state that allows the operation (for instance rescheduling a
    /// message that is in flight).
    #[error("message {id} is {state}")]
    WrongState {
        /// The message id.
        id: String,
        /// Its state when the operation was attempted.
        state: crate::State,
    },
    /// No message with this id exists in the queue.
    #[error("message {id} not found")]
    NotFound {
        /// The message id.
        id: String,
    },
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis answered in a shape this version of delayq does not understand.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
}

impl Error {
    /// True when the failure is about reaching Redis (connection refused or dropped, timeout):
    /// retrying later may succeed and nothing about the request itself was wrong.
    pub fn is_connection_error(&self) -> bool {
        match self {
            Error::Redis(e) => {
                e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()
                    || e.is_unrecoverable_error()
            }
            _ => false,
        }
    }

    /// True when the same call may well succeed shortly: a connection error, or Redis saying
    /// it cannot serve right now (`LOADING` its data after a restart, `TRYAGAIN`,
    /// `MASTERDOWN`, `CLUSTERDOWN`). The worker retries settling on these; so can callers.
    pub fn is_retryable(&self) -> bool {
        use redis::{ErrorKind, ServerErrorKind};
        match self {
            Error::Redis(e) => {
                self.is_connection_error()
                    || matches!(
                        e.kind(),
                        ErrorKind::Server(
                            ServerErrorKind::BusyLoading
                                | ServerErrorKind::TryAgain
                                | ServerErrorKind::MasterDown
                                | ServerErrorKind::ClusterDown
                        )
                    )
            }
            _ => false,
        }
    }
}

/// Input that delayq rejects, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InvalidInput {
    /// A queue name that is empty, too long or has characters outside `[A-Za-z0-9._-]`.
    QueueName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A message id that is empty, too long, or has characters outside the allowed set.
    MessageId {
        /// The rejected id.
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A payload larger than the configured limit.
    PayloadTooLarge {
        /// Size of the payload in bytes.
        size: usize,
        /// The configured limit in bytes.
        limit: usize,
    },
    /// A receipt that is not one delayq gave out.
    Receipt {
        /// The rejected receipt (at most its first 200 characters).
        receipt: String,
    },
    /// A delay or due time that is out of range.
    Schedule(String),
    /// An option that is out of range (max attempts, backoff, batch size, lease).
    Option(String),
}

impl fmt::Display for InvalidInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidInput::QueueName { name, reason } => write!(f, "queue name {name:?}: {reason}"),
            InvalidInput::MessageId { id, reason } => write!(f, "message id {id:?}: {reason}"),
            InvalidInput::PayloadTooLarge { size, limit } => {
                write!(
                    f,
                    "payload of {size} bytes is over the limit of {limit} bytes"
                )
            }
            InvalidInput::Receipt { receipt } => write!(f, "receipt {receipt:?} is malformed"),
            InvalidInput::Schedule(why) => write!(f, "schedule: {why}"),
            InvalidInput::Option(why) => write!(f, "option: {why}"),
        }
    }
}

impl std::error::Error for InvalidInput {}

/// Shorthand for results of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
