//! `POST /v1/queues/{queue}/rotate-keys` (admin): seals what the queue stores again with the
//! newest key of the server's `--keys-file` (`Queue::rotate_keys`), online, in bounded steps.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde::Serialize;
use utoipa::ToSchema;

use super::access::{AdminRole, Authorized};
use super::body::JsonBody;
use super::path::Path;
use crate::error::{ApiResult, ErrorBody};
use crate::state::AppState;

/// What a rotation did.
#[derive(Serialize, ToSchema)]
struct RotatedOut {
    queue: String,
    /// The id of the key everything is now sealed with (the key file's last).
    key: String,
    /// Messages (pending or dead) and schedules sealed again with it.
    resealed: u64,
    /// Left as they were because they moved, changed or ended meanwhile: run it again.
    changed: u64,
    /// Sealed with a key this server does not hold: left as they were.
    unopened: u64,
    /// In flight, which a rotation does not touch: once settled, the next run takes them.
    in_flight: u64,
}

/// `POST /v1/queues/{queue}/rotate-keys`: seals the queue's pending messages, dead letters
/// and schedules again with the newest key of the server's `--keys-file` (and, on a queue
/// that encrypts, those stored in clear), online, a hundred records a step. 503
/// `no_encryption_key` on a server without keys.
#[utoipa::path(post, path = "/v1/queues/{queue}/rotate-keys", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = RotatedOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn rotate(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    // Takes no body, but refuses a form's like every JSON route (`api/body.rs`).
    _: JsonBody,
) -> ApiResult<impl IntoResponse> {
    let done = state.queue(&queue)?.rotate_keys().await?;
    Ok(Json(RotatedOut {
        queue,
        key: done.key,
        resealed: done.resealed,
        changed: done.changed,
        unopened: done.unopened,
        in_flight: done.in_flight,
    }))
}
