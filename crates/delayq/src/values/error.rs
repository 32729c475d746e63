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
        state: crate::values::state::State,
    },
    /// The queue holds messages, and was to be deleted only when empty
    /// ([`Queue::delete`](crate::Queue::delete) without `force`). Nothing of them was lost.
    #[error("queue {queue} holds {messages} messages: delete it with force to delete them too")]
    NotEmpty {
        /// The queue's name.
        queue: String,
        /// How many it held (pending, in flight and dead).
        messages: u64,
    },
    /// No message with this id exists in the queue.
    #[error("message {id} not found")]
    NotFound {
        /// The message id.
        id: String,
    },
    /// Redis could not be reached or answered with an error.
    #[error("redis: {0}")]
    Redis(redis::RedisError),
    /// Redis answered in a shape this version of delayq does not understand.
    #[error("unexpected reply from redis: {0}")]
    Protocol(String),
    /// The queue's data is in a newer format than this delayq reads ([`DATA_FORMAT`](crate::DATA_FORMAT)):
    /// a newer version of delayq wrote it. Nothing was read or written; upgrade this process.
    #[error("the queue's data is format {found}, newer than format {supported}, the newest this delayq reads: upgrade this process")]
    NewerFormat {
        /// The format the queue's data is in, as Redis holds it.
        found: String,
        /// The newest format this delayq reads.
        supported: u32,
    },
    /// An upgrade of a queue's data format was refused: processes that read only older
    /// formats are running (or were, less than a lease ago), and would misread the data.
    /// Nothing was changed; upgrade or stop them first.
    #[error("{} running process(es) read only formats older than {newest} ({}): upgrade or stop them, then upgrade the queue", processes.len(), processes.join(", "))]
    OlderProcesses {
        /// The format the upgrade was to stamp.
        newest: u32,
        /// Each such process, as `<name> (reads up to format <n>)`.
        processes: Vec<String>,
    },
    /// The call needs a newer data format than the queue's data is in (a message with a
    /// group needs [`GROUPS_FORMAT`](crate::GROUPS_FORMAT)). Nothing was written; upgrade
    /// the queue (`Queue::upgrade_format`, `delayq format upgrade <queue>`) once every
    /// process reads that format.
    #[error("{feature} need(s) the queue's data in format {needed} or later, and it is in format {found}: upgrade the queue (delayq format upgrade)")]
    FormatTooOld {
        /// What needs the format.
        feature: &'static str,
        /// The queue's data format.
        found: u32,
        /// The format needed.
        needed: u32,
    },
    /// The server is older than delayq runs on ([`MINIMUM_REDIS`](crate::MINIMUM_REDIS)):
    /// refused on connect, before anything was written.
    #[error("{found} is too old for delayq, which needs {needed}: upgrade the server")]
    ServerTooOld {
        /// The server found, as `Redis 6.2.14`.
        found: String,
        /// What delayq needs.
        needed: String,
    },
    /// The queue encrypts its payloads ([`Setting::Encryption`](crate::Setting::Encryption))
    /// and this client holds no key to seal them with ([`Config::keys`](crate::Config::keys)):
    /// nothing was written.
    #[error("queue {queue} encrypts its payloads and this client holds no key (Config::keys; the server's --keys-file)")]
    NoKey {
        /// The queue.
        queue: String,
    },
    /// The queue began to encrypt its payloads while this send ran, and the send, made
    /// again sealed, met a second change: nothing was written; sending again is safe.
    #[error(
        "queue {queue} changed its encryption while this send ran: nothing was written, send again"
    )]
    EncryptionChanged {
        /// The queue.
        queue: String,
    },
    /// A send asked to be on `wanted` replicas ([`SendOptions::replicas`](crate::SendOptions::replicas))
    /// and only `replicas` had it within the timeout. The message was written; a failover now
    /// could lose it.
    #[error("the send reached {replicas} of the {wanted} replicas it asked for in time")]
    NotReplicated {
        /// Replicas that acknowledged the write.
        replicas: u32,
        /// Replicas asked for.
        wanted: u32,
    },
}

impl Error {
    /// A script's refusal of bad input, known by the text after `prefix` in its error, as an
    /// [`InvalidInput::Schedule`] that says `what` and why (nothing was written); any other
    /// error as it is.
    pub(crate) fn refused_schedule(self, prefix: &str, what: &str) -> Error {
        let Error::Redis(r) = &self else {
            return self;
        };
        let text = r.to_string();
        match text.split_once(prefix) {
            Some((_, why)) => InvalidInput::Schedule(format!(
                "{what}: {}",
                why.split(" script:").next().unwrap_or(why).trim()
            ))
            .into(),
            None => self,
        }
    }

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
    /// `MASTERDOWN`, `CLUSTERDOWN`, `MISCONF`: it cannot write to its disk, and refuses
    /// writes until it can), or a failover under way: `READONLY` (the server was the
    /// master and has been made a replica; with Sentinel the client moves to the new master
    /// by itself), or no sentinel naming a master that answers yet, or a cluster redirect
    /// (`MOVED`, `ASK`) still there after redis-rs followed it a few times, as happens while
    /// a failover or reshard settles. The worker retries
    /// settling on these; so can callers.
    pub fn is_retryable(&self) -> bool {
        use redis::{ErrorKind, ServerErrorKind};
        let passing = |kind: ServerErrorKind| {
            matches!(
                kind,
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ClusterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::Moved
                    | ServerErrorKind::Ask
            )
        };
        match self {
            Error::Redis(e) => match e.kind() {
                _ if self.is_connection_error() => true,
                // Redis cannot persist (its disk is full or broken) and refuses writes
                // until it can again: nothing was written.
                _ if e.code() == Some("MISCONF") => true,
                ErrorKind::MasterNameNotFoundBySentinel => true,
                // A transaction (a batch without caller ids) that Redis refused whole: it is
                // retryable when every command in it was refused for a passing reason.
                ErrorKind::Server(ServerErrorKind::ExecAbort) => {
                    e.clone().into_server_errors().is_some_and(|errors| {
                        !errors.is_empty()
                            && errors.iter().all(|(_, e)| e.kind().is_some_and(passing))
                    })
                }
                ErrorKind::Server(kind) => passing(kind),
                _ => false,
            },
            // Written but maybe not durable: a retry with the same caller id is safe.
            Error::NotReplicated { .. } => true,
            _ => false,
        }
    }

    /// True when Redis is at its `maxmemory` (`OOM`): sends are refused until consumers
    /// drain it (acks, nacks and deletes still run), so a producer may try again later. Not
    /// [`is_retryable`](Self::is_retryable): it does not pass by itself.
    pub fn is_out_of_memory(&self) -> bool {
        matches!(self, Error::Redis(e) if e.code() == Some("OOM"))
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
    /// A group name that is empty, too long, or has characters outside the allowed set
    /// (those of caller ids).
    Group {
        /// The rejected name.
        group: String,
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
            InvalidInput::Group { group, reason } => write!(f, "group {group:?}: {reason}"),
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

impl From<redis::RedisError> for Error {
    fn from(e: redis::RedisError) -> Self {
        Error::Redis(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a server reply `-<line>` becomes.
    fn server_error(line: &str) -> Error {
        let value = redis::parse_redis_value(format!("-{line}\r\n").as_bytes());
        match value {
            Ok(redis::Value::ServerError(e)) => Error::Redis(e.into()),
            other => panic!("not a server error: {other:?}"),
        }
    }

    #[test]
    fn redirects_left_over_from_a_failover_or_reshard_are_retryable() {
        // redis-rs follows MOVED and ASK a few times, then hands them back; during a failover
        // (slot map still changing) or a reshard that is where they end, and the same call
        // works once the cluster has settled.
        assert!(server_error("MOVED 3999 127.0.0.1:6381").is_retryable());
        assert!(server_error("ASK 3999 127.0.0.1:6381").is_retryable());
        assert!(
            server_error("TRYAGAIN Multiple keys request during rehashing of slot").is_retryable()
        );
        assert!(!server_error("ERR wrong number of arguments").is_retryable());
    }
}
