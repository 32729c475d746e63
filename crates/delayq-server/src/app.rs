//! The whole HTTP app: the API's routes with their OpenAPI document, the dashboard's
//! routes, and the layers every request passes (the front door, the body guard, the
//! request's span and metrics). The API and the dashboard are two fronts side by side; this
//! is the one place that joins them.

use std::sync::Arc;

use axum::extract::DefaultBodyLimit;
use axum::routing::get;
use axum::{Json, Router};

use crate::api;
use crate::state::AppState;

/// The router with every route, built together with its OpenAPI document (served at
/// `/openapi.json`), so that the two cannot disagree.
pub fn router(state: AppState) -> Router {
    let limits = state.limits();
    let body_limit = limits.max_body_bytes;
    let body_guard =
        crate::body_guard::BodyGuard::new(limits.body_timeout, limits.max_body_bytes_in_flight);
    let body_rules = api::body::BodyRules {
        payload_limit: limits.max_body_bytes,
        control_limit: limits.max_control_body_bytes.min(limits.max_body_bytes),
    };
    let (router, api) = api::routes_and_document();
    let api = Arc::new(api);
    router
        .route(
            "/openapi.json",
            get(move |_: api::access::Authorized<api::access::AnyRole>| {
                let api = api.clone();
                async move { Json(api.as_ref().clone()) }
            }),
        )
        .merge(crate::ui::routes())
        // One layer for all: a span, the request's metrics and the audit log.
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::request_layer::each_request,
        ))
        .fallback(api::not_found)
        .method_not_allowed_fallback(api::method_not_allowed)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(axum::Extension(body_rules))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::front_door::guard,
        ))
        .layer(axum::middleware::from_fn_with_state(
            body_guard,
            crate::body_guard::guard,
        ))
        .with_state(state)
}
