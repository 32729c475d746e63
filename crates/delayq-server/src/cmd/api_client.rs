//! How every admin command reaches delayq: as a request of the HTTP API, answered in its JSON
//! shapes. With `--url` (or `DELAYQ_URL`) the request goes over HTTP to that server with
//! `--token` (or `DELAYQ_TOKEN`), so on-call needs no access to Redis or the data dir.
//! Without it, the same request is handled in this process by the server's own router on a
//! Redis client of this process (`--redis-url`, or the embedded Redis of the data dir). One
//! path either way: a command's `--json` prints the API's answer, the same in both modes.

use std::fmt;
use std::time::Duration;

use anyhow::Context;
use axum::body::Body;
use axum::http::{header, Method, Request};
use delayq::DelayQ;
use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::state::AppState;
use http_body_util::BodyExt;
use serde_json::Value;

/// How long one request over HTTP may take (a followed event stream asks in shorter waits).
const HTTP_TIMEOUT: Duration = Duration::from_secs(60);

/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Where a command's requests go.
pub enum ApiClient {
    /// The server's router, in this process, on its own Redis client.
    InProcess(axum::Router),
    /// A server over HTTP.
    Http {
        base: String,
        token: Option<String>,
        http: reqwest::Client,
    },
}

/// An answer that is not a success: the API's error code and message (or `http_<status>`
/// and the text of an answer that is not the API's error shape).
#[derive(Debug)]
pub struct ApiFailure {
    pub code: String,
    pub message: String,
}

impl fmt::Display for ApiFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}

impl std::error::Error for ApiFailure {}

impl ApiClient {
    /// Requests handled in this process, on `dq`. Every route is allowed and every push or
    /// webhook address taken: whoever can reach the Redis can write all of it anyway, and
    /// each server checks the addresses it calls against its own `--push-allow` as it
    /// calls them.
    pub fn in_process(dq: DelayQ) -> anyhow::Result<ApiClient> {
        let limits = Limits {
            push_allow: vec![
                "0.0.0.0/0".parse().map_err(anyhow::Error::msg)?,
                "::/0".parse().map_err(anyhow::Error::msg)?,
            ],
            ..Limits::default()
        };
        let state = AppState::new(dq, limits, Tokens::default(), None);
        // The audit log says what this process did as the local CLI's.
        state.set_audit_via("cli");
        Ok(ApiClient::InProcess(delayq_server::app::router(state)))
    }

    /// Requests sent to the server at `base` with `token`. A token that would cross the
    /// network in clear text (plain `http://` to a host that is not loopback) is sent all
    /// the same, with a warning: the operations guide says to put TLS in front.
    pub fn http(base: &str, token: Option<String>) -> anyhow::Result<ApiClient> {
        let url = reqwest::Url::parse(base).with_context(|| format!("--url {base:?}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            anyhow::bail!("--url {base:?}: give an http:// or https:// URL");
        }
        if token.is_some() && url.scheme() == "http" && !is_loopback(&url) {
            eprintln!(
                "delayq: warning: the token goes to {} in clear text (http://); use https://",
                url.host_str().unwrap_or_default()
            );
        }
        // reqwest's rustls needs a crypto provider (an https URL); ring is the workspace's.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .timeout(HTTP_TIMEOUT)
            .connect_timeout(CONNECT_TIMEOUT)
            .build()
            .context("an HTTP client")?;
        Ok(ApiClient::Http {
            base: base.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    /// `GET path` (with its query).
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// One request; a JSON answer (`null` for an empty one), or the [`ApiFailure`] (as the
    /// error, to be downcast by a command that treats one code apart).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let (status, bytes) = match self {
            ApiClient::InProcess(router) => in_process(router, method, path, body).await?,
            ApiClient::Http { base, token, http } => {
                let mut request = http.request(method, format!("{base}{path}"));
                if let Some(token) = token {
                    request = request.bearer_auth(token);
                }
                if let Some(body) = body {
                    request = request.json(body);
                }
                let answer = request
                    .send()
                    .await
                    .with_context(|| format!("no answer from {base}"))?;
                let status = answer.status().as_u16();
                let bytes = answer.bytes().await.context("reading the answer")?;
                (status, bytes.to_vec())
            }
        };
        if (200..300).contains(&status) {
            if bytes.is_empty() {
                return Ok(Value::Null);
            }
            return serde_json::from_slice(&bytes).context("the answer is not JSON");
        }
        Err(failure(status, &bytes).into())
    }
}

async fn in_process(
    router: &axum::Router,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> anyhow::Result<(u16, Vec<u8>)> {
    use hyper::service::Service;
    let mut request = Request::builder().method(method).uri(path);
    let body = match body {
        Some(value) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(serde_json::to_vec(value)?)
        }
        None => Body::empty(),
    };
    let request = request.body(body).context("a request")?;
    let service = hyper_util::service::TowerToHyperService::new(router.clone());
    let answer = match service.call(request).await {
        Ok(answer) => answer,
        Err(never) => match never {},
    };
    let status = answer.status().as_u16();
    let bytes = answer
        .into_body()
        .collect()
        .await
        .context("reading the answer")?
        .to_bytes();
    Ok((status, bytes.to_vec()))
}

/// Whether `url` names this machine (`localhost` or a loopback address).
fn is_loopback(url: &reqwest::Url) -> bool {
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || bare
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The failure an answer of `status` with `bytes` says.
fn failure(status: u16, bytes: &[u8]) -> ApiFailure {
    let parsed: Option<Value> = serde_json::from_slice(bytes).ok();
    let error = parsed.as_ref().map(|v| &v["error"]);
    let text = |key: &str| error.and_then(|e| e[key].as_str()).map(str::to_owned);
    ApiFailure {
        code: text("code").unwrap_or_else(|| format!("http_{status}")),
        message: text("message")
            .unwrap_or_else(|| String::from_utf8_lossy(bytes).trim().to_owned()),
    }
}

/// `text` as one path segment: every byte but the unreserved ones percent-encoded.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char)
            }
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// A query string of `pairs` (those with a value), `?` first when there is any.
pub fn query(pairs: &[(&str, Option<String>)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter_map(|(key, value)| value.as_ref().map(|v| format!("{key}={}", segment(v))))
        .collect();
    match parts.is_empty() {
        true => String::new(),
        false => format!("?{}", parts.join("&")),
    }
}

/// A page by offset (dead letters, groups): `--offset` and `--limit`.
#[derive(clap::Args)]
pub struct OffsetPage {
    /// Skip this many (in the list's order).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    limit: usize,
}

impl OffsetPage {
    /// The page as a query string: `?offset=N&limit=M`.
    pub fn query(&self) -> String {
        query(&[
            ("offset", Some(self.offset.to_string())),
            ("limit", Some(self.limit.to_string())),
        ])
    }
}

/// Whether `error` is the API's failure with `code`.
pub fn is_code(error: &anyhow::Error, code: &str) -> bool {
    error
        .downcast_ref::<ApiFailure>()
        .is_some_and(|f| f.code == code)
}
