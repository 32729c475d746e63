//! The HTTP API: routes and the health endpoints. Every route is under `/v1` except the
//! probes; every handler checks its role first, then its input, then does one library call.
//!
//! | route | role |
//! |---|---|
//! | `POST /v1/queues/{queue}/messages` send one (JSON, or raw bytes) | send |
//! | `POST /v1/queues/{queue}/batch` send many | send |
//! | `GET /v1/queues/{queue}/messages/{id}`, `DELETE` (cancel) | send |
//! | `POST /v1/queues/{queue}/messages/{id}/reschedule` | send |
//! | `POST /v1/queues/{queue}/receive`, `ack`, `nack`, `extend`, `release` | consume |
//! | `GET /v1/queues`, `GET /v1/queues/{queue}` (stats) | admin |
//! | `GET /v1/queues/{queue}/dead`, `POST .../requeue`, `POST .../purge` | admin |
//! | `GET /metrics` (Prometheus text) | admin |
//! | `GET /healthz` (process up), `GET /readyz` (Redis answers) | none |

mod admin;
mod consume;
mod produce;
pub mod wire;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use axum::{Json, Router};

use crate::error::ApiError;
use crate::state::AppState;

/// The router with every route.
pub fn router(state: AppState) -> Router {
    let body_limit = state.limits().max_body_bytes;
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .route("/v1/queues", get(admin::queues))
        .route("/v1/queues/{queue}", get(admin::stats))
        .route("/v1/queues/{queue}/messages", post(produce::send))
        .route("/v1/queues/{queue}/batch", post(produce::send_batch))
        .route(
            "/v1/queues/{queue}/messages/{id}",
            get(produce::get).delete(produce::cancel),
        )
        .route(
            "/v1/queues/{queue}/messages/{id}/reschedule",
            post(produce::reschedule),
        )
        .route("/v1/queues/{queue}/receive", post(consume::receive))
        .route("/v1/queues/{queue}/ack", post(consume::ack))
        .route("/v1/queues/{queue}/nack", post(consume::nack))
        .route("/v1/queues/{queue}/extend", post(consume::extend))
        .route("/v1/queues/{queue}/release", post(consume::release))
        .route("/v1/queues/{queue}/dead", get(admin::dead_list))
        .route("/v1/queues/{queue}/requeue", post(admin::requeue))
        .route("/v1/queues/{queue}/purge", post(admin::purge))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(state)
}

async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready when Redis answers a read (a queue's stats) in time.
async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    match state.queue("readyz") {
        Ok(q) => match q.stats().await {
            Ok(_) => Json(serde_json::json!({ "status": "ready" })).into_response(),
            Err(e) => ApiError::from(e).into_response(),
        },
        Err(e) => e.into_response(),
    }
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// Prometheus text format (admin role).
async fn metrics(
    State(state): State<AppState>,
    headers: axum::http::HeaderMap,
) -> Result<impl IntoResponse, ApiError> {
    state.authorize(&headers, crate::auth::Role::Admin)?;
    let Some(handle) = state.metrics() else {
        return Err(ApiError::not_found("metrics are off"));
    };
    let text = crate::metrics::render(&state, handle).await?;
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    ))
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such route")
}
