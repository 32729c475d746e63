//! The client's settings ([`Config`]): limits, timeouts, how far apart its consumers'
//! claims on one partition go, how far ahead of a due time they take a message, and the
//! keys of payloads encrypted at rest.

use std::time::Duration;

use crate::values::error::InvalidInput;

/// Client settings.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Config {
    /// Largest payload accepted by `send`, in bytes (default 1 MiB).
    pub max_payload_bytes: usize,
    /// How long an ordinary command may take before the client gives up on it (default 5 s).
    /// Blocking waits use their own connection and are not bound by this.
    pub response_timeout: Duration,
    /// How long connecting may take (default 5 s).
    pub connection_timeout: Duration,
    /// The least time between two claims of this client's consumers on one partition
    /// (default 1 ms; at most [`MAX_CLAIM_SPACING`]; zero: none). Every claim costs Redis
    /// the same fixed work however few messages it takes, so on a busy partition, where
    /// messages come due microseconds apart, one claim a millisecond takes them together
    /// instead of one claim each. A message is then late by up to this time, and only when
    /// a claim on its partition went less than this time before it came due: one that
    /// comes due alone is claimed on time. A claim that took all it could is followed at
    /// once, so a backlog drains at full speed.
    pub claim_spacing: Duration,
    /// How long before its due time a consumer may take a message (default 2 ms; at most
    /// [`MAX_LOOK_AHEAD`]; zero: only once due). A claim then takes, besides what is due,
    /// the messages without a group that come due within this time; the consumer holds them
    /// under their lease (which runs from their due time on) and hands each over at its due
    /// time, by the Redis server's clock, never before. So claims that are spaced, or that
    /// take several messages due close together, deliver each on time, and at a steady rate
    /// one claim serves several messages. A message taken ahead is in flight: a cancel or
    /// reschedule of it answers `in_flight`, as for one being handled, and an upsert sends a
    /// new message beside it. A group's messages are taken only once due (their order). A
    /// consumer made for a single receive (an HTTP long-poll) does not look ahead.
    pub look_ahead: Duration,
    /// What this process is, as the registry of processes lists it (`delayq processes`):
    /// e.g. `server`, `worker`, `cli` (default none: a library client). Up to 32 of
    /// `a-z0-9_-`.
    pub process_role: Option<String>,
    /// The keys that seal and open payloads on queues that encrypt them
    /// ([`Setting::Encryption`](crate::Setting::Encryption); default none). Without them
    /// a send to such a queue is refused ([`Error::NoKey`](crate::Error::NoKey)), and a
    /// consumer makes each message it takes there a dead letter, `undecryptable: no key
    /// <id>`, for a client that holds the key to requeue.
    pub keys: Option<crate::values::sealing::Keyring>,
}

/// The longest [`Config::claim_spacing`].
pub const MAX_CLAIM_SPACING: Duration = Duration::from_millis(100);

/// The longest [`Config::look_ahead`].
pub const MAX_LOOK_AHEAD: Duration = Duration::from_secs(1);

impl Default for Config {
    fn default() -> Self {
        Config {
            max_payload_bytes: 1024 * 1024,
            response_timeout: Duration::from_secs(5),
            connection_timeout: Duration::from_secs(5),
            claim_spacing: Duration::from_millis(1),
            look_ahead: Duration::from_millis(2),
            process_role: None,
            keys: None,
        }
    }
}

impl Config {
    /// Sets the payload limit.
    pub fn max_payload_bytes(mut self, bytes: usize) -> Self {
        self.max_payload_bytes = bytes;
        self
    }

    /// Sets the response timeout of ordinary commands.
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets the least time between claims on one partition ([`Config::claim_spacing`]).
    pub fn claim_spacing(mut self, spacing: Duration) -> Self {
        self.claim_spacing = spacing;
        self
    }

    /// Sets how long before its due time a consumer may take a message
    /// ([`Config::look_ahead`]).
    pub fn look_ahead(mut self, ahead: Duration) -> Self {
        self.look_ahead = ahead;
        self
    }

    /// Says what this process is ([`Config::process_role`]).
    pub fn process_role(mut self, role: &str) -> Self {
        self.process_role = Some(role.to_owned());
        self
    }

    /// Gives the client keys to seal and open payloads with ([`Config::keys`]).
    pub fn keys(mut self, keys: crate::values::sealing::Keyring) -> Self {
        self.keys = Some(keys);
        self
    }

    pub(crate) fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(role) = &self.process_role {
            let fits =
                |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
            if role.is_empty() || role.len() > 32 || !role.chars().all(fits) {
                return Err(InvalidInput::Option(format!(
                    "a process role is 1 to 32 of a-z0-9_-, not {role:?}"
                )));
            }
        }
        if self.claim_spacing > MAX_CLAIM_SPACING {
            return Err(InvalidInput::Option(format!(
                "a claim spacing of {:?} is longer than {MAX_CLAIM_SPACING:?}",
                self.claim_spacing
            )));
        }
        if self.look_ahead > MAX_LOOK_AHEAD {
            return Err(InvalidInput::Option(format!(
                "a look-ahead of {:?} is longer than {MAX_LOOK_AHEAD:?}",
                self.look_ahead
            )));
        }
        Ok(())
    }
}
