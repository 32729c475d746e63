//! Group routes (admin): a queue's groups, most messages first; what one group holds; and one
//! group's own settings: pause, a concurrency and a rate limit in place of the queue's, a
//! weight (README, "Groups"). Group names are tenants' and customers' names, so only admins see them.

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use delayq::{GroupInfo, GroupSettings};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::access::{AdminRole, Authorized};
use super::admin::{present_or_null, RateLimitArg};
use super::body::{parse, JsonBody};
use super::path::Path;
use super::query::Query;
use crate::error::{ApiResult, ErrorBody};
use crate::state::AppState;

/// One group: what it holds and its settings.
#[derive(Serialize, ToSchema)]
struct GroupOut {
    name: String,
    delayed: u64,
    ready: u64,
    in_flight: u64,
    paused: bool,
    /// At most this many of its messages in flight: its own limit, else the queue's (null:
    /// no limit).
    concurrency: Option<u32>,
    /// Its own limit, if it has one.
    own_concurrency: Option<u32>,
    /// Messages it gives per turn of the rotation.
    weight: u32,
    /// At most this many of its messages delivered a second: its own limit, else the
    /// queue's `group_rate_limit` (null: none).
    rate_limit: Option<RateLimitArg>,
    /// Its own rate limit, if it has one.
    own_rate_limit: Option<RateLimitArg>,
}

impl From<GroupInfo> for GroupOut {
    fn from(g: GroupInfo) -> Self {
        GroupOut {
            name: g.name,
            delayed: g.delayed,
            ready: g.ready,
            in_flight: g.in_flight,
            paused: g.paused,
            concurrency: g.concurrency,
            own_concurrency: g.own_concurrency,
            weight: g.weight,
            rate_limit: g.rate_limit.map(RateLimitArg::from),
            own_rate_limit: g.own_rate_limit.map(RateLimitArg::from),
        }
    }
}

#[derive(Serialize, ToSchema)]
struct GroupSummaryOut {
    name: String,
    /// Its messages, pending and in flight.
    messages: u64,
}

#[derive(Serialize, ToSchema)]
struct GroupsOut {
    /// Groups with messages, in all.
    total: u64,
    groups: Vec<GroupSummaryOut>,
}

#[derive(Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct GroupPage {
    /// Groups to skip (at most 10000).
    offset: Option<u64>,
    /// Groups in the page, 1 to 1000 (default 100).
    limit: Option<usize>,
}

/// `GET /v1/queues/{queue}/groups?offset=0&limit=100`: most messages first.
#[utoipa::path(get, path = "/v1/queues/{queue}/groups", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), GroupPage), responses((status = 200, body = GroupsOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    Query(page): Query<GroupPage>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    let limit = page.limit.unwrap_or(100);
    let found = q.groups().list(page.offset.unwrap_or(0), limit).await?;
    Ok(Json(GroupsOut {
        total: found.total,
        groups: found
            .groups
            .into_iter()
            .map(|g| GroupSummaryOut {
                name: g.name,
                messages: g.messages,
            })
            .collect(),
    }))
}

/// `GET /v1/queues/{queue}/groups/{group}`: what the group holds, and its settings.
#[utoipa::path(get, path = "/v1/queues/{queue}/groups/{group}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("group" = String, Path, description = "Group name", pattern = "^[A-Za-z0-9._:@/-]{1,128}$")), responses((status = 200, body = GroupOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, group)): Path<(String, String)>,
) -> ApiResult<impl IntoResponse> {
    let q = state.queue(&queue)?;
    Ok(Json(GroupOut::from(q.groups().get(&group).await?)))
}

/// A group's settings to change; those left out stay as they are.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSettingsIn {
    /// At most this many of the group's messages in flight, in place of the queue's
    /// `group_concurrency`; `null`: the queue's again.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000000)]
    concurrency: Option<Option<u32>>,
    /// Messages the group gives per turn of the rotation (1 to 1000); `null`: 1.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    weight: Option<Option<u32>>,
    /// `true` pauses the group (the rest of the queue flows), `false` resumes it.
    paused: Option<bool>,
    /// At most this many of the group's messages delivered a second, in place of the
    /// queue's `group_rate_limit`; `null`: the queue's again.
    #[serde(default, deserialize_with = "present_or_null")]
    #[schema(value_type = Option<RateLimitArg>)]
    rate_limit: Option<Option<RateLimitArg>>,
}

/// `PATCH /v1/queues/{queue}/groups/{group}`: changes the group's own settings, all or none.
#[utoipa::path(patch, path = "/v1/queues/{queue}/groups/{group}", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$"), ("group" = String, Path, description = "Group name", pattern = "^[A-Za-z0-9._:@/-]{1,128}$")), request_body = GroupSettingsIn, responses((status = 200, body = GroupOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn configure(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path((queue, group)): Path<(String, String)>,
    JsonBody(body): JsonBody,
) -> ApiResult<impl IntoResponse> {
    let settings: GroupSettingsIn = parse(&body)?;
    let q = state.queue(&queue)?;
    let changes = GroupSettings {
        concurrency: settings.concurrency,
        weight: settings.weight,
        paused: settings.paused,
        rate_limit: settings
            .rate_limit
            .map(|limit| limit.map(delayq::RateLimit::from)),
    };
    Ok(Json(GroupOut::from(
        q.groups().configure(&group, changes).await?,
    )))
}
