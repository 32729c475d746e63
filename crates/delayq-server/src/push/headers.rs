//! Which extra request headers a push target or a message may set. Checked when they are set
//! (a 400 that names the header) and again before a request is made, so an envelope stored
//! before these rules cannot slip one through.
//!
//! Refused: names and values HTTP cannot carry; the headers that frame a request or its
//! connection (`content-length`, `transfer-encoding`, `connection`, ...: the HTTP client
//! writes those itself, and a second one is how requests are smuggled); `host` (which site
//! of the receiver's server the request is for: the URL says that); everything a proxy reads
//! (`proxy-*`); and delayq's own (`delayq-*`: a receiver must be able to trust them).

use std::collections::BTreeMap;

/// Most extra headers on one request.
pub const MAX_HEADERS: usize = 64;

/// Longest header value, bytes.
pub const MAX_VALUE_BYTES: usize = 8 * 1024;

/// Most bytes of names and values together.
pub const MAX_TOTAL_BYTES: usize = 32 * 1024;

/// Headers nobody may set, by lowercase name (and the prefixes below).
const RESERVED: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "te",
    "trailer",
    "upgrade",
    "expect",
    "http2-settings",
];

/// Prefixes of the names nobody may set.
const RESERVED_PREFIXES: [&str; 2] = ["proxy-", "delayq-"];

/// Checks `headers` (`field` names where they came from in the error).
pub fn check(field: &str, headers: &BTreeMap<String, String>) -> Result<(), String> {
    if headers.len() > MAX_HEADERS {
        return Err(format!("{field}: at most {MAX_HEADERS} headers"));
    }
    let mut total = 0;
    for (name, value) in headers {
        total += name.len() + value.len();
        if reqwest::header::HeaderName::from_bytes(name.as_bytes()).is_err() {
            return Err(format!("{field}: {name:?} is not a header name"));
        }
        if is_reserved(name) {
            return Err(format!(
                "{field}: {name:?} cannot be set (it frames or routes the request, or is \
                 delayq's own)"
            ));
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(format!(
                "{field}: the value of {name:?} is over {MAX_VALUE_BYTES} bytes"
            ));
        }
        if reqwest::header::HeaderValue::from_str(value).is_err() {
            return Err(format!(
                "{field}: the value of {name:?} has characters a header cannot carry"
            ));
        }
    }
    if total > MAX_TOTAL_BYTES {
        return Err(format!("{field}: over {MAX_TOTAL_BYTES} bytes in all"));
    }
    Ok(())
}

/// Whether nobody may set the header `name`.
pub fn is_reserved(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    RESERVED.contains(&name.as_str()) || RESERVED_PREFIXES.iter().any(|p| name.starts_with(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(name: &str, value: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(name.to_owned(), value.to_owned())])
    }

    #[test]
    fn framing_routing_and_delayqs_own_headers_are_refused() {
        for name in [
            "Host",
            "content-length",
            "Transfer-Encoding",
            "connection",
            "keep-alive",
            "TE",
            "trailer",
            "upgrade",
            "expect",
            "proxy-authorization",
            "Proxy-Connection",
            "delayq-signature",
        ] {
            assert!(check("headers", &one(name, "x")).is_err(), "{name}");
        }
        for (name, value) in [
            ("bad name", "x"),
            ("", "x"),
            ("x-a", "a\r\nb"),
            ("x-a", "\0"),
        ] {
            assert!(check("headers", &one(name, value)).is_err(), "{name:?}");
        }
        assert!(check("headers", &one("x-a", &"v".repeat(MAX_VALUE_BYTES + 1))).is_err());
        for (name, value) in [
            ("authorization", "Bearer x"),
            ("content-type", "text/plain"),
            ("x-tenant", "7"),
            ("x-empty", ""),
        ] {
            assert_eq!(check("headers", &one(name, value)), Ok(()), "{name}");
        }
        let many: BTreeMap<String, String> = (0..=MAX_HEADERS)
            .map(|i| (format!("x-{i}"), "v".into()))
            .collect();
        assert!(check("headers", &many).is_err());
    }
}
