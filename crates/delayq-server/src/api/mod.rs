//! The HTTP API: routes and the health endpoints. Every route is under `/v1` except the
//! probes; every handler checks its role first, then its input, then does one library call.
//!
//! | route | role |
//! |---|---|
//! | `POST /v1/queues/{queue}/messages` send one (JSON, or raw bytes) | send |
//! | `POST /v1/queues/{queue}/batch` send many | send |
//! | `GET /v1/queues/{queue}/messages/{id}`, `DELETE` (cancel) | send |
//! | `POST /v1/queues/{queue}/messages/{id}/reschedule`; `POST .../cancel` (many ids, `cancel_many.rs`) | send |
//! | `POST /v1/queues/{queue}/receive`, `ack`, `nack`, `extend`, `release` | consume |
//! | `POST /v1/receive` (several queues: strict order or weights) | consume |
//! | `GET /v1/queues`, `GET /v1/queues/{queue}` (stats), `PUT` (create), `PATCH` (settings), `DELETE` (`queue_delete.rs`) | admin |
//! | `POST /v1/queues/{queue}/pause`, `POST .../resume` | admin |
//! | `GET /v1/queues/{queue}/dead`, `POST .../requeue`, `POST .../purge` | admin |
//! | `PUT /v1/queues/{queue}/push` (set the push target), `GET`, `DELETE` | admin |
//! | `PUT /v1/queues/{queue}/webhooks` (URLs called with its events), `GET`, `DELETE` | admin |
//! | `GET /v1/queues/{queue}/schedules`; `PUT`, `GET`, `PATCH`, `DELETE .../schedules/{name}` | admin |
//! | `GET /v1/queues/{queue}/format`, `POST .../upgrade`; `GET /v1/processes` | admin |
//! | `POST /v1/queues/{queue}/rotate-keys` (payloads sealed again with the newest key, `keys.rs`) | admin |
//! | `GET /metrics` (Prometheus text) | admin or monitor |
//! | `GET /v1/queues/{queue}/messages?state=` (browse), `GET .../events` (JSON or SSE) | any but monitor |
//! | `GET /openapi.json` (this table, as OpenAPI 3.1) | any but monitor |
//! | `GET /readyz` (Redis answers) | any |
//! | `GET /healthz` (process up) | none |

pub mod access;
mod admin;
mod audit;
mod batch_reader;
pub mod body;
pub mod browse;
mod cancel_many;
mod consume;
pub mod events;
mod formats;
mod groups;
mod keys;
mod path;
mod produce;
mod push;
mod query;
mod queue_delete;
mod schedules;
mod sized_json;
pub mod upsert_args;
mod webhooks;
pub mod wire;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::{Json, Router};
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ErrorBody};
use crate::state::AppState;

/// The API's routes, built together with their OpenAPI document (the app serves it at
/// `/openapi.json`), so that the two cannot disagree.
pub fn routes_and_document() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    routes().split_for_parts()
}

/// The OpenAPI document of every route.
pub fn openapi() -> utoipa::openapi::OpenApi {
    routes().into_openapi()
}

fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(admin::queues))
        .routes(routes!(
            admin::stats,
            admin::create,
            admin::configure,
            queue_delete::delete
        ))
        .routes(routes!(produce::send, browse::list))
        .routes(routes!(produce::send_batch))
        .routes(routes!(produce::get, produce::cancel))
        .routes(routes!(produce::reschedule))
        .routes(routes!(cancel_many::cancel_many))
        .routes(routes!(events::events))
        .routes(routes!(consume::receive))
        .routes(routes!(consume::receive_many))
        .routes(routes!(consume::ack))
        .routes(routes!(consume::nack))
        .routes(routes!(consume::extend))
        .routes(routes!(consume::release))
        .routes(routes!(admin::dead_list))
        .routes(routes!(admin::requeue))
        .routes(routes!(admin::purge))
        .routes(routes!(admin::pause))
        .routes(routes!(admin::resume))
        .routes(routes!(push::put, push::get, push::delete))
        .routes(routes!(webhooks::put, webhooks::get, webhooks::delete))
        .routes(routes!(schedules::list))
        .routes(routes!(
            schedules::put,
            schedules::get,
            schedules::set_state,
            schedules::delete
        ))
        .routes(routes!(schedules::backfill))
        .routes(routes!(groups::list))
        .routes(routes!(groups::get, groups::configure))
        .routes(routes!(formats::get))
        .routes(routes!(formats::upgrade))
        .routes(routes!(keys::rotate))
        .routes(routes!(formats::processes))
        .routes(routes!(audit::list))
}

#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "delayq", description = "A reliable delayed-message queue on Redis: send now, deliver later, at least once."),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
    tags(
        (name = "produce", description = "Send, get, cancel, reschedule (role send)"),
        (name = "consume", description = "Receive and settle by receipt (role consume)"),
        (name = "admin", description = "Queues, stats, pause and resume, dead letters, data formats and upgrades, metrics (role admin)"),
        (name = "browse", description = "Lists and searches of messages by state, and the event stream (any token)"),
        (name = "probes", description = "Health (no token) and readiness (any token, a monitor's too)"),
    )
)]
struct ApiDoc;

/// Declares the bearer token scheme.
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, api: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let scheme = SecurityScheme::Http(
            HttpBuilder::new()
                .scheme(HttpAuthScheme::Bearer)
                .description(Some(
                    "A token of the server's tokens file. Its role (send, consume, admin, \
                     monitor) decides which routes it may use (403 forbidden); a token scoped \
                     to some queues acts on and lists those only, and a route of any other \
                     queue answers 403 out_of_scope, whether that queue exists or not.",
                ))
                .build(),
        );
        api.components
            .get_or_insert_with(Default::default)
            .add_security_scheme("bearer", scheme);
    }
}

#[utoipa::path(get, path = "/healthz", tag = "probes", security(()),
    responses((status = 200, description = "The process is up")))]
async fn healthz() -> impl IntoResponse {
    Json(serde_json::json!({ "status": "ok" }))
}

/// Ready when Redis answers a read (a queue's stats) in time; names the server delayq
/// connected to (checked then: `delayq::MINIMUM_REDIS`).
#[utoipa::path(get, path = "/readyz", tag = "probes",
    responses((status = 200, body = ReadyOut, description = "Redis answers"), (status = 401, body = ErrorBody),
        (status = 503, body = ErrorBody)))]
async fn readyz(
    State(state): State<AppState>,
    _: access::Authorized<access::ProbeRole>,
) -> impl IntoResponse {
    match state.queue("readyz") {
        Ok(q) => match q.stats().await {
            Ok(_) => {
                let server = state.dq().server();
                Json(ReadyOut {
                    status: "ready",
                    server: ServerOut {
                        kind: server.kind.as_str(),
                        version: server.version.to_string(),
                    },
                })
                .into_response()
            }
            Err(e) => ApiError::from(e).into_response(),
        },
        Err(e) => e.into_response(),
    }
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct ReadyOut {
    /// Always "ready".
    status: &'static str,
    /// The server delayq connected to (on a cluster, the master with the oldest version).
    server: ServerOut,
}

#[derive(serde::Serialize, utoipa::ToSchema)]
struct ServerOut {
    /// "redis" or "valkey".
    kind: &'static str,
    /// Its version.
    version: String,
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

/// Prometheus text format (role admin or monitor).
#[utoipa::path(get, path = "/metrics", tag = "admin",
    responses((status = 200, description = "Prometheus text", content_type = "text/plain"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody)))]
async fn metrics(
    State(state): State<AppState>,
    auth: access::Authorized<access::MonitorRole>,
) -> Result<impl IntoResponse, ApiError> {
    let Some(handle) = state.metrics() else {
        return Err(ApiError::not_found("metrics are off"));
    };
    let read_stats = || async {
        let mut all = Vec::new();
        for name in state.dq().queues().await? {
            let stats = state.queue(name.as_str())?.stats().await?;
            all.push((name.to_string(), stats));
        }
        Ok(all)
    };
    let mut text = crate::metrics::render(state.gauge_cache(), handle, read_stats).await?;
    if let Some(caller) = auth.caller().filter(|c| !c.scope.is_every_queue()) {
        // A scoped token's scraper sees its queues' series, and those of no queue.
        text = crate::metrics_scope::in_scope(&text, &caller.scope);
    }
    Ok((
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        text,
    ))
}

pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_route", "no such route")
}
