//! Times written as text: RFC 3339 with any UTC offset (`Z`, `+02:00`, `-03:30`) and any
//! fraction of a second, read the same way wherever a time is given (the API's
//! `deliver_at`, the CLI's `--at`, the dashboard's forms), to the millisecond.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch of `text`; an error says why it is not a time.
pub fn unix_ms(text: &str) -> Result<u64, String> {
    let at = chrono::DateTime::parse_from_rfc3339(text.trim()).map_err(|e| {
        format!("{text:?} is not an RFC 3339 time such as 2026-12-01T09:00:00+01:00 ({e})")
    })?;
    u64::try_from(at.timestamp_millis())
        .map_err(|_| format!("{text:?} is before 1970-01-01T00:00:00Z"))
}

/// `text` as a `SystemTime` (the CLI's value parser).
pub fn system_time(text: &str) -> Result<SystemTime, String> {
    unix_ms(text).map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_fractions_name_the_same_instant() {
        assert_eq!(unix_ms("1970-01-01T00:00:01Z"), Ok(1_000));
        assert_eq!(unix_ms("1970-01-01T01:00:01.25+01:00"), Ok(1_250));
        assert_eq!(unix_ms(" 1970-01-01T00:00:00.0019-00:00 "), Ok(1));
        assert!(unix_ms("1970-01-01T00:00:00").is_err(), "no offset");
        assert!(unix_ms("1969-12-31T23:59:59Z").is_err());
        assert!(unix_ms("tomorrow").is_err());
    }
}
