//! How secrets are shown where they must not be read whole. A URL's path and query often
//! are its receiver's credential (a chat tool's incoming-webhook URL, `?code=` keys), so a
//! push target's URL, its failure callback, webhook URLs and a message's own push URL are
//! shown whole to admins only: errors that lower roles read (a message's error history,
//! `last_error`, the `retry` and `dead` events), the dashboard of a session that is not an
//! admin's, and the server's log name their scheme and host only.

use std::error::Error;

/// `url`'s scheme, host and port (`https://hooks.example.com`), never its user, path or
/// query.
pub fn origin(url: &reqwest::Url) -> String {
    match url.host_str() {
        Some(_) => url.origin().ascii_serialization(),
        None => format!("{}:", url.scheme()),
    }
}

/// [`origin`] of a URL given as text; text that is not a URL is not shown at all.
pub fn origin_of(text: &str) -> String {
    reqwest::Url::parse(text).map_or_else(|_| "(not a URL)".to_owned(), |u| origin(&u))
}

/// What went wrong with a request to `url`: `what` (`cannot connect`), the URL's origin, and
/// the error's causes. reqwest's own text of an error holds the whole URL, so it is left
/// out: its causes (refused, TLS, an address the policy refused) say the rest.
pub fn request_error(what: &str, url: &reqwest::Url, e: &reqwest::Error) -> String {
    let mut text = format!("{what}: {}", origin(url));
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_origin_keeps_scheme_host_and_port_only() {
        let url = |s: &str| reqwest::Url::parse(s).expect("a URL");
        assert_eq!(
            origin(&url(
                "https://user:pw@hooks.example.com/T/B/secret?code=k#f"
            )),
            "https://hooks.example.com"
        );
        assert_eq!(
            origin(&url("http://127.0.0.1:8080/p?q")),
            "http://127.0.0.1:8080"
        );
        assert_eq!(origin_of("not a url/secret"), "(not a URL)");
    }
}
