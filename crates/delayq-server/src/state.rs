//! What every request handler shares: the Redis client, the limits, the tokens, and the
//! shutdown signal that ends held long-polls.

use std::sync::Arc;

use delayq::{DelayQ, Queue};
use tokio::sync::watch;

use crate::auth::{Role, Tokens};
use crate::error::ApiResult;
use crate::limits::Limits;

/// Shared server state. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    dq: DelayQ,
    limits: Limits,
    tokens: Tokens,
    /// Flipped to true when shutdown starts: long-polls answer at once (empty).
    shutting_down: watch::Sender<bool>,
}

impl AppState {
    /// State for a server on `dq`.
    pub fn new(dq: DelayQ, limits: Limits, tokens: Tokens) -> Self {
        AppState(Arc::new(Inner {
            dq,
            limits,
            tokens,
            shutting_down: watch::channel(false).0,
        }))
    }

    /// The Redis client.
    pub fn dq(&self) -> &DelayQ {
        &self.0.dq
    }

    /// The limits.
    pub fn limits(&self) -> &Limits {
        &self.0.limits
    }

    /// The queue named in a path (400 if the name is invalid).
    pub fn queue(&self, name: &str) -> ApiResult<Queue> {
        Ok(self.0.dq.queue(name)?)
    }

    /// Checks the request's token for `role` (see [`Tokens::authorize`]).
    pub fn authorize(&self, headers: &axum::http::HeaderMap, role: Role) -> ApiResult<()> {
        self.0.tokens.authorize(headers, role)
    }

    /// Starts shutting down: held long-polls return.
    pub fn begin_shutdown(&self) {
        self.0.shutting_down.send_replace(true);
    }

    /// Completes when shutdown has started.
    pub async fn shutdown_started(&self) {
        let mut rx = self.0.shutting_down.subscribe();
        let _ = rx.wait_for(|down| *down).await;
    }
}
