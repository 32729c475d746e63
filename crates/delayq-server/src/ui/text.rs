//! How the dashboard writes things: URL path segments and page paths, times and spans.

/// The dashboard page of queue `name`.
pub fn queue_path(name: &str) -> String {
    format!("/ui/queues/{}", segment(name))
}

/// The dashboard page of group `group` of queue `queue`.
pub fn group_path(queue: &str, group: &str) -> String {
    format!("{}/groups/{}", queue_path(queue), segment(group))
}

/// `text` for a URL path segment: everything but unreserved characters percent-encoded
/// (message ids may hold `/`, `:` and `@`).
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `ms` since the Unix epoch as a UTC time to the second, as people read it.
pub fn utc(ms: u64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms);
    let text = humantime::format_rfc3339_seconds(t).to_string();
    text.replace('T', " ").replace('Z', " UTC")
}

/// A span of ms as people read it: `850 ms`, `12.5 s`, `3 min`, `2.0 h`, `4.5 d`.
pub fn span(ms: f64) -> String {
    let abs = ms.abs();
    if abs < 1_000.0 {
        format!("{ms:.0} ms")
    } else if abs < 60_000.0 {
        format!("{:.1} s", ms / 1_000.0)
    } else if abs < 3_600_000.0 {
        format!("{:.0} min", ms / 60_000.0)
    } else if abs < 86_400_000.0 {
        format!("{:.1} h", ms / 3_600_000.0)
    } else {
        format!("{:.1} d", ms / 86_400_000.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_and_times_read_as_intended() {
        assert_eq!(segment("order:1/a@b c"), "order%3A1%2Fa%40b%20c");
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(span(850.0), "850 ms");
        assert_eq!(span(12_500.0), "12.5 s");
        assert_eq!(span(-180_000.0), "-3 min");
    }
}
