//! `GET /v1/audit` (admin): the audit log, newest first, a page at a time (`audit/mod.rs`
//! says what is recorded). An admin of some queues sees those queues' entries only.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use serde::Deserialize;
use utoipa::IntoParams;

use super::access::{AdminRole, Authorized};
use super::query::Query;
use crate::audit::Page;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::state::AppState;

/// Most entries of one page.
const MAX_LIMIT: usize = 1000;

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    /// Entries of this queue only.
    queue: Option<String>,
    /// Entries older than this one (a page's `next`).
    before: Option<String>,
    /// Most entries (1 to 1000, default 100).
    limit: Option<usize>,
}

/// `GET /v1/audit`: who did what, newest first.
#[utoipa::path(get, path = "/v1/audit", tag = "admin", params(AuditQuery),
    responses((status = 200, body = Page), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    auth: Authorized<AdminRole>,
    Query(query): Query<AuditQuery>,
) -> ApiResult<impl IntoResponse> {
    let limit = query.limit.unwrap_or(100);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit is 1 to {MAX_LIMIT}"),
        ));
    }
    if let Some(before) = &query.before {
        // A stream id: <ms>-<n>.
        let valid = before
            .split_once('-')
            .is_some_and(|(ms, n)| ms.parse::<u64>().is_ok() && n.parse::<u64>().is_ok());
        if !valid {
            return Err(ApiError::bad_request(
                "invalid_cursor",
                "before is an entry's id, <ms>-<n>",
            ));
        }
    }
    if let Some(queue) = &query.queue {
        if !auth.may_use(queue) {
            return Err(crate::auth::out_of_scope());
        }
    }
    let page = crate::audit::read(
        &state,
        auth.caller(),
        query.queue.as_deref(),
        query.before.as_deref(),
        limit,
    )
    .await?;
    Ok(Json(page))
}
