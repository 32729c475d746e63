//! A message's error history, as the `errors` hash keeps it: its last five failures, oldest
//! first, each with its attempt, its time and its text (the newest up to 4 KiB, a client's
//! error with its stack; the older ones their first 512 bytes), in one field
//! written by `add_error` in the scripts' prelude.

/// One failed attempt of a message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FailedAttempt {
    /// Which delivery failed, counting from 1 (0 for an error kept before histories were).
    pub attempt: u32,
    /// When, ms since the Unix epoch (server clock; 0 when not known).
    pub at_ms: u64,
    /// What went wrong.
    pub error: String,
}

/// A history field as a script returns it (absent: no failures): the last error's text, and
/// every entry.
pub(crate) fn read(field: Option<Vec<u8>>) -> (Option<String>, Vec<FailedAttempt>) {
    let history = field.map(|b| decode(&b)).unwrap_or_default();
    (history.last().map(|e| e.error.clone()), history)
}

/// Takes a history apart. A field that does not start with an entry is one plain error text,
/// as kept before histories.
pub(crate) fn decode(bytes: &[u8]) -> Vec<FailedAttempt> {
    if bytes.is_empty() {
        return Vec::new();
    }
    if bytes[0] != 1 {
        return vec![FailedAttempt {
            attempt: 0,
            at_ms: 0,
            error: String::from_utf8_lossy(bytes).into_owned(),
        }];
    }
    let mut out = Vec::new();
    let mut rest = bytes;
    while let Some((head, tail)) = rest.split_first_chunk::<11>() {
        if head[0] != 1 {
            break;
        }
        let len = usize::from(u16::from_be_bytes([head[9], head[10]]));
        let Some(text) = tail.get(..len) else { break };
        out.push(FailedAttempt {
            attempt: u32::from(u16::from_be_bytes([head[1], head[2]])),
            at_ms: head[3..9].iter().fold(0u64, |n, b| n << 8 | u64::from(*b)),
            error: String::from_utf8_lossy(text).into_owned(),
        });
        rest = &tail[len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(attempt: u16, at_ms: u64, text: &str) -> Vec<u8> {
        let mut e = vec![1];
        e.extend_from_slice(&attempt.to_be_bytes());
        e.extend_from_slice(&at_ms.to_be_bytes()[2..]);
        e.extend_from_slice(&(text.len() as u16).to_be_bytes());
        e.extend_from_slice(text.as_bytes());
        e
    }

    #[test]
    fn reads_entries_and_older_plain_text() {
        let mut bytes = entry(1, 1_700_000_000_000, "timeout");
        bytes.extend(entry(2, 1_700_000_001_000, ""));
        let got = decode(&bytes);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[0],
            FailedAttempt {
                attempt: 1,
                at_ms: 1_700_000_000_000,
                error: "timeout".into()
            }
        );
        assert_eq!((got[1].attempt, got[1].error.as_str()), (2, ""));
        assert_eq!(decode(b"boom")[0].error, "boom");
        assert!(decode(b"").is_empty());
        // Cut short: what is whole is kept.
        assert_eq!(decode(&bytes[..bytes.len() - 1]).len(), 1);
    }
}
