//! What every request passes before any route sees it, and what every answer carries, so
//! that a web page the operator visits cannot drive the server through their browser:
//!
//! * **Host.** Without tokens (loopback mode), only names the server answers to are taken:
//!   loopback names, IP addresses, and the names given with `--allow-host`. A page whose
//!   own name was made to resolve to 127.0.0.1 (DNS rebinding) sends its own name as `Host`
//!   and is refused (403 `host_not_allowed`), so it can neither read payloads nor set a
//!   push target. A request that names no host (HTTP/1.0) comes from no browser and is
//!   taken. With tokens the token decides, and any name may be used.
//! * **Origin.** A state change (any method but GET, HEAD and OPTIONS) that a browser says
//!   comes from another site (`Sec-Fetch-Site` other than `same-origin` or `none`), or whose
//!   `Origin` is not this server's, is refused (403 `cross_origin`): a cross-site form or
//!   `fetch` cannot purge, pause, requeue, send or receive. Clients that are not browsers
//!   send neither header and are not affected.
//! * **Framing and sniffing.** Every answer says `X-Frame-Options: DENY`,
//!   `Content-Security-Policy: frame-ancestors 'none'` (no page may frame the dashboard to
//!   trick a click) and `X-Content-Type-Options: nosniff`.
//!
//! JSON routes also refuse other content types (415, `api/body.rs`), which a form cannot
//! send without the browser asking the server first.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::state::AppState;

/// The middleware: checks the request, then adds the headers to whatever is answered.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let checked = check(&state, request.method(), request.headers());
    let mut response = match checked {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    };
    let headers = response.headers_mut();
    headers.insert("x-frame-options", HeaderValue::from_static("DENY"));
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers
        .entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("frame-ancestors 'none'"));
    response
}

fn check(state: &AppState, method: &Method, headers: &HeaderMap) -> Result<(), ApiError> {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok());
    let allowed = &state.limits().allowed_hosts;
    // A request with no Host at all (HTTP/1.0, a bare probe) comes from no browser page.
    if state.tokens().is_empty() && !host.is_none_or(|h| host_allowed(h, allowed)) {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "host_not_allowed",
            "without tokens this server answers only to loopback names, IP addresses and \
             the names given with --allow-host",
        ));
    }
    if matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    let site = headers.get("sec-fetch-site").and_then(|v| v.to_str().ok());
    let cross_site = site.is_some_and(|s| s != "same-origin" && s != "none");
    let foreign_origin = headers
        .get(header::ORIGIN)
        .map(|origin| !origin_is_own(origin, host, allowed))
        .unwrap_or(false);
    if cross_site || foreign_origin {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "cross_origin",
            "a state change from another site's page is refused",
        ));
    }
    Ok(())
}

/// The host part of a `Host` value or an origin's authority (`name:port`, `[::1]:port`).
fn host_name(authority: &str) -> &str {
    if let Some(rest) = authority.strip_prefix('[') {
        return rest.split(']').next().unwrap_or("");
    }
    authority.rsplit_once(':').map_or(authority, |(h, _)| h)
}

/// Whether a token-less server may answer to `host` (a `Host` header value).
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host).trim_end_matches('.').to_ascii_lowercase();
    // An address cannot be rebound: a page that uses one is on that address already.
    name.parse::<IpAddr>().is_ok()
        || name == "localhost"
        || name.ends_with(".localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(&name))
}

/// Whether `origin` (`scheme://authority`) is this server as the request reached it.
fn origin_is_own(origin: &HeaderValue, host: Option<&str>, allowed: &[String]) -> bool {
    let Some(authority) = origin
        .to_str()
        .ok()
        .and_then(|o| o.split_once("://"))
        .map(|(_, authority)| authority)
    else {
        return false; // "null" (a sandboxed page, a file, a redirect) or nonsense
    };
    host.is_some_and(|h| h.eq_ignore_ascii_case(authority))
        || allowed
            .iter()
            .any(|a| a.eq_ignore_ascii_case(host_name(authority)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names_and_origins_read_as_intended() {
        assert_eq!(host_name("localhost:7400"), "localhost");
        assert_eq!(host_name("[::1]:7400"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
        let allowed = vec!["delayq.example.com".to_owned()];
        assert!(host_allowed("127.0.0.1:7400", &[]));
        assert!(host_allowed("[::1]:7400", &[]));
        assert!(host_allowed("LOCALHOST:7400", &[]));
        assert!(host_allowed("app.localhost", &[]));
        assert!(host_allowed("delayq.example.com.:443", &allowed));
        assert!(!host_allowed("evil.example:7400", &allowed));
        assert!(!host_allowed("localhost.evil.example", &[]));
        let own = HeaderValue::from_static("http://127.0.0.1:7400");
        assert!(origin_is_own(&own, Some("127.0.0.1:7400"), &[]));
        assert!(!origin_is_own(&own, Some("127.0.0.1:7401"), &[]));
        let public = HeaderValue::from_static("https://delayq.example.com");
        assert!(origin_is_own(&public, Some("10.0.0.5:7400"), &allowed));
        assert!(!origin_is_own(
            &HeaderValue::from_static("null"),
            Some("x"),
            &[]
        ));
    }
}
