//! Push target routes: set, read and remove the HTTP endpoint a queue's messages are pushed
//! to (`push/`). Setting one turns the queue over to the servers' push runtime: its messages
//! are no longer handed to pull consumers.

use std::collections::BTreeMap;
use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::access::{AdminRole, Authorized};
use super::admin::RateLimitArg;
use super::body::{parse, JsonBody};
use super::path::Path;
use super::wire::{DurationArg, SendBody};
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::push::address::{check_url, AddressPolicy};
use crate::push::target::{self, PushTarget};
use crate::state::AppState;

/// A push target to set.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PushBody {
    /// Where to send each message: `http://` or `https://`.
    url: String,
    /// POST (default), PUT or PATCH.
    method: Option<String>,
    /// Extra headers of each request.
    headers: Option<BTreeMap<String, String>>,
    /// How long one request may take (default 10 s, at most 10 min).
    timeout: Option<DurationArg>,
    /// Most requests at once, per server (default 16).
    #[schema(minimum = 1, maximum = 1000)]
    concurrency: Option<usize>,
    /// Signing keys (16-256 characters): the current one, and during a rotation the old one.
    /// Default: the target's keys if it has some, else a new random key.
    signing_keys: Option<Vec<String>>,
    /// Statuses that dead-letter a message at once (default: every 4xx but 408 and 429).
    dead_statuses: Option<Vec<u16>>,
    /// Called once with a message and its errors when it becomes a dead letter.
    failure_callback: Option<String>,
    /// Follow redirects (default false).
    follow_redirects: Option<bool>,
    /// At most this many requests a second across every server.
    rate_limit: Option<RateLimitArg>,
    /// Origins (`https://hooks.example.com`: scheme, host and port) that a message's own
    /// `push.url` may be on, matched exactly. Default: none, so messages cannot bring a URL.
    allow_message_urls: Option<Vec<String>>,
}

/// A queue's push target.
#[derive(Serialize, ToSchema)]
struct PushOut {
    url: String,
    method: String,
    headers: BTreeMap<String, String>,
    timeout_ms: u64,
    concurrency: usize,
    /// The keys requests are signed with: verify `Delayq-Signature` with them.
    signing_keys: Vec<String>,
    dead_statuses: Option<Vec<u16>>,
    failure_callback: Option<String>,
    follow_redirects: bool,
    /// Origins a message's own URL may be on (empty: none).
    allow_message_urls: Vec<String>,
}

impl From<PushTarget> for PushOut {
    fn from(t: PushTarget) -> Self {
        PushOut {
            url: t.url,
            method: t.method,
            headers: t.headers,
            timeout_ms: t.timeout_ms,
            concurrency: t.concurrency,
            signing_keys: t.signing_keys,
            dead_statuses: t.dead_statuses,
            failure_callback: t.failure_callback,
            follow_redirects: t.follow_redirects,
            allow_message_urls: t.allow_message_urls,
        }
    }
}

/// Checks `urls` against the server's address policy (`--push-allow`): the first that it may
/// not reach is a 400 `code`. Only an admin sets URLs, so the error may say what the host
/// resolves to.
pub(super) async fn check_addresses(
    state: &AppState,
    urls: &[reqwest::Url],
    code: &'static str,
) -> ApiResult<()> {
    let policy = AddressPolicy::new(state.limits().push_allow.clone());
    for url in urls {
        check_url(&policy, url)
            .await
            .map_err(|e| ApiError::bad_request(code, e.detailed()))?;
    }
    Ok(())
}

/// `PUT /v1/queues/{queue}/push`: sets the queue's push target (every server then pushes its
/// messages). A URL that resolves to a loopback, private or link-local address is refused
/// (400 `push_target_refused`) unless the server allows that network (`--push-allow`).
#[utoipa::path(put, path = "/v1/queues/{queue}/push", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = PushBody,
    responses((status = 200, body = PushOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn put(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let body: PushBody = parse(&body)?;
    let q = state.queue(&queue)?;
    let existing = target::load(state.dq(), &q).await?;
    let timeout = match &body.timeout {
        Some(t) => t.get("timeout")?,
        None => Duration::from_secs(10),
    };
    let signing_keys =
        crate::push::signature::keys_to_set(body.signing_keys, existing.map(|t| t.signing_keys));
    let invalid = |e: String| ApiError::bad_request("invalid_push_target", e);
    let allow_message_urls =
        target::allowed_origins(body.allow_message_urls.unwrap_or_default()).map_err(invalid)?;
    let target = PushTarget {
        url: body.url,
        method: body
            .method
            .unwrap_or_else(|| "POST".into())
            .to_ascii_uppercase(),
        headers: body.headers.unwrap_or_default(),
        timeout_ms: timeout.as_millis().min(u128::from(u64::MAX)) as u64,
        concurrency: body.concurrency.unwrap_or(16),
        signing_keys,
        dead_statuses: body.dead_statuses,
        failure_callback: body.failure_callback,
        follow_redirects: body.follow_redirects.unwrap_or(false),
        allow_message_urls,
    };
    let (url, callback) = target.validate().map_err(invalid)?;
    let urls: Vec<reqwest::Url> = std::iter::once(url).chain(callback).collect();
    check_addresses(&state, &urls, "push_target_refused").await?;
    if let Some(limit) = body.rate_limit {
        q.configure(&[delayq::Setting::RateLimit(Some(limit.into()))])
            .await?;
    }
    target::save(state.dq(), &q, &target).await?;
    Ok(Json(PushOut::from(target)))
}

/// `GET /v1/queues/{queue}/push`.
#[utoipa::path(get, path = "/v1/queues/{queue}/push", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, body = PushOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let target = target::load(state.dq(), &q)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("{queue} has no push target")))?;
    Ok(Json(PushOut::from(target)))
}

/// `DELETE /v1/queues/{queue}/push`: the queue goes back to pull consumers.
#[utoipa::path(delete, path = "/v1/queues/{queue}/push", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 204), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    if !target::remove(state.dq(), &q).await? {
        return Err(ApiError::not_found(format!("{queue} has no push target")));
    }
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// The `push.url` a message to send brings, if any.
pub(super) fn message_url(body: &SendBody) -> Option<String> {
    body.push.as_ref().and_then(|d| d.url.clone())
}

/// Refuses messages whose own URLs the queue's push target does not allow
/// (`allow_message_urls`): 400 `push_url_not_allowed`. A queue without a target takes them
/// (they are checked again when pushed). Costs a read of the target only when a URL is given.
pub(super) async fn check_message_urls(
    state: &AppState,
    queue: &delayq::Queue,
    urls: &[String],
) -> ApiResult<()> {
    if urls.is_empty() {
        return Ok(());
    }
    let Some(target) = target::load(state.dq(), queue).await? else {
        return Ok(());
    };
    for text in urls {
        let allowed = reqwest::Url::parse(text).is_ok_and(|url| target.allows_message_url(&url));
        if !allowed {
            return Err(ApiError::bad_request(
                "push_url_not_allowed",
                format!(
                    "push.url {text:?}: its origin is not in the allow_message_urls of the \
                     queue's push target"
                ),
            ));
        }
    }
    Ok(())
}
