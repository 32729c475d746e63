//! `DELETE /v1/queues/{queue}`: deletes a queue (refused while it holds messages, unless
//! `?force=true`) with what the server keeps of it and this server's cached handle
//! ([`AppState::delete_queue`]). Its metric gauges go within seconds (`metrics.rs`: a gauge not set again is
//! dropped).

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::access::{AdminRole, Authorized};
use super::path::Path;
use super::query::Query;
use crate::deletion::DeletedOut;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DeleteQuery {
    /// Delete the messages it holds too (pending, in flight and dead); without it, a queue
    /// that holds any is refused (409 `queue_not_empty`).
    #[serde(default)]
    force: bool,
}

/// `DELETE /v1/queues/{queue}`: deletes the queue, its settings, schedules, events, history,
/// push target and webhooks, in batches of a bounded size; with `force=true` its messages
/// too. 404 for a queue that was never used.
#[utoipa::path(delete, path = "/v1/queues/{queue}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), DeleteQuery), responses((status = 200, body = DeletedOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    Query(query): Query<DeleteQuery>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let deleted = state.delete_queue(&q, query.force).await?;
    if !deleted.existed {
        return Err(ApiError::not_found(format!("no queue {queue}")));
    }
    tracing::info!(
        queue = %q.name(),
        messages = deleted.messages,
        keys = deleted.keys,
        raced = deleted.raced,
        "queue deleted"
    );
    Ok(Json(DeletedOut::new(&queue, &deleted)))
}
