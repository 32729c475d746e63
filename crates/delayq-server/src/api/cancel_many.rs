//! `POST /v1/queues/{queue}/cancel`: cancels many messages by id in one request (on-call's
//! bulk cancel: `delayq cancel QUEUE ID...`, or every message of a state or a search, which
//! the CLI pages through `GET .../messages` and cancels a page at a time). Each id is its
//! own atomic cancel: one that moved meanwhile (in flight, dead) is left alone and says so.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use delayq::CancelOutcome;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::access::{Authorized, SendRole};
use super::body::{parse, JsonBody};
use super::path::Path;
use crate::error::{ApiResult, ErrorBody};
use crate::state::AppState;

/// The ids to cancel.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelManyIn {
    /// 1 to the server's batch limit (`--max-batch`, default 1000) message ids.
    ids: Vec<String>,
}

/// What became of each id, in the order given.
#[derive(Serialize, ToSchema)]
struct CancelManyOut {
    /// How many were cancelled.
    cancelled: u64,
    results: Vec<CancelResultOut>,
}

#[derive(Serialize, ToSchema)]
struct CancelResultOut {
    id: String,
    /// `cancelled`, `not_cancelled` (in flight or dead: left alone) or `not_found`.
    outcome: &'static str,
    /// The state it was in (cancelled or not); none when not found.
    #[serde(skip_serializing_if = "Option::is_none")]
    state: Option<&'static str>,
}

/// `POST /v1/queues/{queue}/cancel` with `{"ids": [...]}`.
#[utoipa::path(post, path = "/v1/queues/{queue}/cancel", tag = "produce", params(("queue" = String, Path, description = "Queue name: 1-64 of A-Za-z0-9._-", pattern = "^[A-Za-z0-9._-]{1,64}$")),
    request_body = CancelManyIn,
    responses((status = 200, body = CancelManyOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 413, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn cancel_many(
    State(state): State<AppState>,
    _: Authorized<SendRole>,
    Path(queue): Path<String>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let body: CancelManyIn = parse(&body)?;
    state.limits().check_batch(body.ids.len())?;
    let q = state.queue(&queue)?;
    let mut cancelled = 0;
    let mut results = Vec::with_capacity(body.ids.len());
    for id in body.ids {
        let (outcome, state) = match q.cancel(&id).await? {
            CancelOutcome::Cancelled(s) => {
                cancelled += 1;
                ("cancelled", Some(s.as_str()))
            }
            CancelOutcome::NotCancelled(s) => ("not_cancelled", Some(s.as_str())),
            _ => ("not_found", None),
        };
        results.push(CancelResultOut { id, outcome, state });
    }
    // The audit log names the messages cancelled.
    let ids = results
        .iter()
        .filter(|r| r.outcome == "cancelled")
        .map(|r| r.id.clone())
        .collect();
    let mut response = Json(CancelManyOut { cancelled, results }).into_response();
    response.extensions_mut().insert(crate::audit::Detail {
        ids,
        ..Default::default()
    });
    Ok(response)
}
