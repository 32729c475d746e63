//! Data format routes (admin): a queue's format and upgrade progress, its upgrade, and the
//! processes using this Redis with the newest format each reads (README, "Upgrading").

use axum::extract::State;
use axum::response::IntoResponse;
use axum::Json;
use delayq::{QueueFormat, DATA_FORMAT};
use serde::Serialize;
use utoipa::ToSchema;

use super::access::{AdminRole, Authorized};
use super::body::JsonBody;
use super::path::Path;
use crate::error::{ApiResult, ErrorBody};
use crate::state::AppState;

/// A queue's data format, partition by partition.
#[derive(Serialize, ToSchema)]
struct FormatOut {
    queue: String,
    /// The queue's format: the oldest of its partitions'.
    format: u32,
    /// The newest format this server reads, and the one an upgrade stamps.
    newest: u32,
    /// Each partition's format (empty: the queue is not used yet).
    partitions: Vec<u32>,
    /// Partitions of the newest format: the upgrade's progress.
    upgraded: usize,
    /// Every partition is of the newest format.
    current: bool,
}

impl FormatOut {
    fn new(queue: &str, f: QueueFormat) -> Self {
        FormatOut {
            queue: queue.to_owned(),
            format: f.format(),
            newest: DATA_FORMAT,
            upgraded: f.upgraded(),
            current: f.is_current(),
            partitions: f.partitions,
        }
    }
}

/// `GET /v1/queues/{queue}/format`: the queue's data format and the upgrade's progress.
#[utoipa::path(get, path = "/v1/queues/{queue}/format", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = FormatOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
) -> ApiResult<impl IntoResponse> {
    let format = state.queue(&queue)?.data_format().await?;
    Ok(Json(FormatOut::new(&queue, format)))
}

/// `POST /v1/queues/{queue}/upgrade`: upgrades the queue's data to the newest format this
/// server reads. Nothing is rewritten and deliveries go on; refused (409 `older_processes`,
/// naming them) while a process that reads only older formats runs.
#[utoipa::path(post, path = "/v1/queues/{queue}/upgrade", tag = "admin", params(("queue" = String, Path, description = "Queue name", pattern = "^[A-Za-z0-9._-]{1,64}$")), responses((status = 200, body = FormatOut), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn upgrade(
    State(state): State<AppState>,
    _: Authorized<AdminRole>,
    Path(queue): Path<String>,
    // Takes no body, but refuses a form's like every JSON route (`api/body.rs`).
    _: JsonBody,
) -> ApiResult<impl IntoResponse> {
    let format = state.queue(&queue)?.upgrade_format().await?;
    Ok(Json(FormatOut::new(&queue, format)))
}

/// A process using this Redis.
#[derive(Serialize, ToSchema)]
struct ProcessOut {
    /// Host, process id and a random part.
    name: String,
    /// The newest data format it reads.
    newest_format: u32,
    /// What it is: `server`, `cli` (a command run in its own process), another a library
    /// client said (`worker`...), or none (a library client that did not say, or a process
    /// of an older delayq).
    role: Option<String>,
    /// Until its announcement runs out (negative: ran out that long ago; it is counted for
    /// one lease more).
    lease_left_ms: i64,
    /// How long ago it last renewed its announcement (every 10 s while it lives, by the
    /// Redis server's clock): the last time it was seen.
    seen_ms_ago: i64,
    /// This is the process that answered (the server asked, or the CLI in local mode).
    answering: bool,
}

#[derive(Serialize, ToSchema)]
struct ProcessesOut {
    /// The newest format this server reads.
    newest: u32,
    processes: Vec<ProcessOut>,
}

/// `GET /v1/processes`: the processes using this Redis, each with the newest data format it
/// reads: an upgrade waits for those that read only older ones.
#[utoipa::path(get, path = "/v1/processes", tag = "admin", responses((status = 200, body = ProcessesOut), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn processes(
    State(state): State<AppState>,
    auth: Authorized<AdminRole>,
) -> ApiResult<impl IntoResponse> {
    // The processes serve every queue: an admin of some queues does not see them.
    auth.every_queue()?;
    let processes = state.dq().processes().await?;
    let lease = delayq::ANNOUNCEMENT_LEASE.as_millis() as i64;
    let me = state.dq().process_name();
    Ok(Json(ProcessesOut {
        newest: DATA_FORMAT,
        processes: processes
            .into_iter()
            .map(|p| ProcessOut {
                answering: p.name == me,
                seen_ms_ago: (lease - p.lease_left_ms).max(0),
                name: p.name,
                newest_format: p.newest_format,
                role: p.role,
                lease_left_ms: p.lease_left_ms,
            })
            .collect(),
    }))
}
