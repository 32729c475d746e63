//! Validated names: queue names and message ids. Both end up inside Redis keys or records,
//! so they are checked once, at the edge, with a clear reason when rejected.

use std::fmt;

use crate::values::error::InvalidInput;

/// Longest queue name, in bytes.
pub const MAX_QUEUE_NAME_LEN: usize = 64;
/// Longest caller-supplied message id, in bytes (the record stores its length in one byte).
pub const MAX_MESSAGE_ID_LEN: usize = 128;

/// A queue name: 1 to 64 characters from `[A-Za-z0-9._-]`.
///
/// The restriction keeps names safe inside a Redis Cluster hash tag (`{` and `}` would break
/// it) and readable in `redis-cli`. Cheap to clone: every delivery carries its queue's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct QueueName(std::sync::Arc<str>);

impl QueueName {
    /// Validates `name`.
    pub fn new(name: &str) -> Result<Self, InvalidInput> {
        let reject = |reason| {
            Err(InvalidInput::QueueName {
                name: name.to_owned(),
                reason,
            })
        };
        if name.is_empty() {
            return reject("must not be empty");
        }
        if name.len() > MAX_QUEUE_NAME_LEN {
            return reject("longer than 64 bytes");
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        {
            return reject("only A-Z, a-z, 0-9, '.', '_' and '-' are allowed");
        }
        Ok(QueueName(name.into()))
    }

    /// The name as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True for ids of the form delayq generates itself: `<due µs>-<sequence>`.
pub(crate) fn is_generated_id(id: &str) -> bool {
    match id.split_once('-') {
        Some((due, seq)) => {
            !due.is_empty()
                && !seq.is_empty()
                && due.len() <= 17
                && seq.len() <= 15
                && due.bytes().chain(seq.bytes()).all(|b| b.is_ascii_digit())
        }
        None => false,
    }
}

/// Checks an id a caller wants to give a new message: 1 to 128 characters from
/// `[A-Za-z0-9._:@/-]`, and not of the form `<digits>-<digits>`, which is reserved for the
/// ids delayq generates.
pub(crate) fn check_caller_id(id: &str) -> Result<(), InvalidInput> {
    check_id_chars(id)?;
    if is_generated_id(id) {
        return Err(InvalidInput::MessageId {
            id: id.to_owned(),
            reason: "the form <digits>-<digits> is reserved for generated ids",
        });
    }
    Ok(())
}

/// Checks an id used to look a message up: a caller id or a generated one.
pub(crate) fn check_lookup_id(id: &str) -> Result<(), InvalidInput> {
    check_id_chars(id)
}

/// Checks a group name ([`SendOptions::group`](crate::SendOptions::group)): as a caller id,
/// 1 to 128 characters from `[A-Za-z0-9._:@/-]`.
pub(crate) fn check_group(group: &str) -> Result<(), InvalidInput> {
    check_id_chars(group).map_err(|e| match e {
        InvalidInput::MessageId { reason, .. } => InvalidInput::Group {
            group: group.to_owned(),
            reason,
        },
        other => other,
    })
}

fn check_id_chars(id: &str) -> Result<(), InvalidInput> {
    let reject = |reason| {
        Err(InvalidInput::MessageId {
            id: id.to_owned(),
            reason,
        })
    };
    if id.is_empty() {
        return reject("must not be empty");
    }
    if id.len() > MAX_MESSAGE_ID_LEN {
        return reject("longer than 128 bytes");
    }
    if !id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'/' | b'-'))
    {
        return reject("only A-Z, a-z, 0-9 and '.', '_', ':', '@', '/', '-' are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        assert!(QueueName::new("orders").is_ok());
        assert!(QueueName::new("a.b_c-1").is_ok());
        assert!(QueueName::new(&"x".repeat(64)).is_ok());
        for bad in [
            "",
            "with space",
            "tag{x}",
            "colon:x",
            &"x".repeat(65),
            "ünï",
        ] {
            assert!(QueueName::new(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn message_ids() {
        assert!(check_caller_id("order-1234").is_ok());
        assert!(check_caller_id("user@shop/42:close").is_ok());
        assert!(
            check_caller_id("1234-5678").is_err(),
            "reserved form accepted"
        );
        assert!(check_lookup_id("1234-5678").is_ok());
        assert!(check_caller_id("").is_err());
        assert!(check_caller_id("a b").is_err());
        assert!(check_caller_id(&"x".repeat(129)).is_err());
        assert!(is_generated_id("1763805600123-42"));
        assert!(!is_generated_id("-42"));
        assert!(!is_generated_id("12-4a"));
    }
}
