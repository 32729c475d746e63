//! Webhook routes: set, read and remove the URLs a queue's events are sent to (`webhooks/`).
//! Admins only: the answer carries the keys the requests are signed with.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::access::{AdminRole, Authorized};
use super::body::{parse, JsonBody};
use super::path::Path;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;
use crate::webhooks::config::{self, Hook, Webhooks};

/// A queue's webhooks to set, in place of those it has.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebhooksBody {
    /// The URLs (at most 10), each with the kinds of events it is sent (none: every kind).
    webhooks: Vec<Hook>,
    /// Signing keys (16-256 characters): the current one, and during a rotation the old one.
    /// Default: the queue's webhook keys if it has some, else a new random key.
    signing_keys: Option<Vec<String>>,
}

/// A queue's webhooks.
#[derive(Serialize, ToSchema)]
struct WebhooksOut {
    webhooks: Vec<Hook>,
    /// The keys requests are signed with: verify `Delayq-Signature` with them.
    signing_keys: Vec<String>,
    /// About how many events each partition keeps: a webhook further behind misses some.
    events_max: Option<u64>,
}

async fn answer(queue: &delayq::Queue, w: Webhooks) -> ApiResult<WebhooksOut> {
    Ok(WebhooksOut {
        webhooks: w.hooks,
        signing_keys: w.signing_keys,
        events_max: queue.stats().await?.events_kept,
    })
}

/// `PUT /v1/queues/{queue}/webhooks`: the queue's events of the kinds each URL asks for are
/// sent to it (POST, JSON, signed), at least once, retried with backoff. Turns on the
/// queue's events if it records none. A URL on a loopback, private or link-local address is
/// refused (400 `webhook_refused`) unless the server allows that network (`--push-allow`).
#[utoipa::path(put, path = "/v1/queues/{queue}/webhooks", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), request_body = WebhooksBody,
    responses((status = 200, body = WebhooksOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn put(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let body: WebhooksBody = parse(&body)?;
    let q = state.queue(&queue)?;
    let existing = config::load(state.dq(), q.name()).await?;
    let replaced = existing.map(|w| w.signing_keys);
    let signing_keys = crate::push::signature::keys_to_set(body.signing_keys, replaced);
    let webhooks = Webhooks {
        hooks: body.webhooks,
        signing_keys,
    };
    let urls = webhooks
        .validate()
        .map_err(|e| ApiError::bad_request("invalid_webhook", e))?;
    super::push::check_addresses(&state, &urls, "webhook_refused").await?;
    // No webhooks: none are kept (and none are called).
    match webhooks.hooks.is_empty() {
        true => config::remove(state.dq(), q.name()).await.map(drop)?,
        false => config::save(state.dq(), &q, &webhooks).await?,
    }
    Ok(Json(answer(&q, webhooks).await?))
}

/// `GET /v1/queues/{queue}/webhooks`: the queue's webhooks and signing keys.
#[utoipa::path(get, path = "/v1/queues/{queue}/webhooks", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 200, body = WebhooksOut), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    match config::load(state.dq(), q.name()).await? {
        Some(w) => Ok(Json(answer(&q, w).await?)),
        None => Err(ApiError::not_found("this queue has no webhooks")),
    }
}

/// `DELETE /v1/queues/{queue}/webhooks`: no more webhook requests (the events stay).
#[utoipa::path(delete, path = "/v1/queues/{queue}/webhooks", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    responses((status = 204, description = "Removed"), (status = 404, body = ErrorBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    if config::remove(state.dq(), q.name()).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::not_found("this queue has no webhooks"))
    }
}
