//! What every request handler shares: the Redis client, the limits, the tokens, and the
//! shutdown signal that ends held long-polls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use delayq::{DelayQ, Deleted, Queue};
use metrics_exporter_prometheus::PrometheusHandle;
use tokio::sync::watch;

use crate::auth::{Caller, Role, Tokens};
use crate::error::ApiResult;
use crate::limits::Limits;
use crate::metrics::GaugeCache;
use crate::push::callbacks::Callbacks;
use crate::streams::event_hub::EventHubs;
use crate::streams::stream_slots::{Holder, StreamSlot, StreamSlots};

/// Most queue handles kept: a handle holds its metric registrations and keeps its queue's
/// wake-up subscription open between long-polls; names beyond this are served uncached, so
/// a client inventing names cannot grow memory without bound.
const MAX_CACHED_QUEUES: usize = 10_000;

/// Shared server state. Cheap to clone.
#[derive(Clone)]
pub struct AppState(Arc<Inner>);

struct Inner {
    dq: DelayQ,
    limits: Limits,
    /// The tokens now: replaced whole by a reload ([`AppState::replace_tokens`]).
    tokens: RwLock<Arc<Tokens>>,
    /// Counts reloads of the tokens, so that streams can end when theirs is removed.
    tokens_reloaded: watch::Sender<u64>,
    /// Flipped to true when shutdown starts: long-polls answer at once (empty).
    shutting_down: watch::Sender<bool>,
    queues: Mutex<HashMap<String, Queue>>,
    metrics: Option<PrometheusHandle>,
    gauges: GaugeCache,
    /// Where deaths found by any request go for their failure callbacks (set by the server
    /// when push delivery runs).
    callbacks: OnceLock<Callbacks>,
    /// The one reader of each queue's events that its streams follow.
    event_hubs: EventHubs,
    /// The event streams open, by token.
    stream_slots: Arc<StreamSlots>,
    /// The dashboard sessions' secret, read from Redis once (`ui/session.rs`).
    session_secret: tokio::sync::OnceCell<Vec<u8>>,
    /// What the audit log says requests came through: `api`, or `cli` for the CLI's own
    /// router on Redis (`cmd/api_client.rs`).
    audit_via: OnceLock<&'static str>,
}

/// Where the dashboard sessions' secret is kept: made by the first server that needs it, read
/// by every other, so that a session is good on each server of one Redis.
const SESSION_SECRET_KEY: &str = "dq:ui-session-secret";

impl AppState {
    /// State for a server on `dq`; `metrics` renders `/metrics` (none: 404).
    pub fn new(
        dq: DelayQ,
        limits: Limits,
        tokens: Tokens,
        metrics: Option<PrometheusHandle>,
    ) -> Self {
        AppState(Arc::new(Inner {
            dq,
            limits,
            tokens: RwLock::new(Arc::new(tokens)),
            tokens_reloaded: watch::channel(0).0,
            shutting_down: watch::channel(false).0,
            queues: Mutex::default(),
            metrics,
            gauges: GaugeCache::default(),
            callbacks: OnceLock::new(),
            event_hubs: EventHubs::default(),
            stream_slots: Arc::default(),
            session_secret: tokio::sync::OnceCell::new(),
            audit_via: OnceLock::new(),
        }))
    }

    /// The tokens now (a reload replaces them; what a request checked stays its own).
    pub fn tokens(&self) -> Arc<Tokens> {
        self.0
            .tokens
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Puts `tokens` in place of the ones before (a reload of the tokens file): requests
    /// from now on are checked against them, dashboard sessions of a removed token end, and
    /// so do its event streams.
    pub fn replace_tokens(&self, tokens: Tokens) {
        *self.0.tokens.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(tokens);
        self.0.tokens_reloaded.send_modify(|n| *n += 1);
    }

    /// Resolves when a stream of `holder` must end: the server stops, or a reload removed
    /// its token. Never for a holder of no token (auth off).
    pub async fn stream_ends(&self, holder: Holder) {
        let mut reloads = self.0.tokens_reloaded.subscribe();
        let revoked = async {
            let Some(id) = holder else {
                return std::future::pending().await;
            };
            // Subscribed first, then checked: no reload falls between the two.
            if !self.tokens().has(id) {
                return;
            }
            while reloads.changed().await.is_ok() {
                if !self.tokens().has(id) {
                    return;
                }
            }
            std::future::pending().await
        };
        tokio::select! {
            () = self.shutdown_started() => {}
            () = revoked => {}
        }
    }

    /// The Prometheus handle, if metrics are on.
    pub fn metrics(&self) -> Option<&PrometheusHandle> {
        self.0.metrics.as_ref()
    }

    /// When the `/metrics` gauges were last read from Redis.
    pub(crate) fn gauge_cache(&self) -> &GaugeCache {
        &self.0.gauges
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
        let mut queues = self.0.queues.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(q) = queues.get(name) {
            return Ok(q.clone());
        }
        let q = self.0.dq.queue(name)?;
        if queues.len() < MAX_CACHED_QUEUES {
            queues.insert(name.to_owned(), q.clone());
        }
        Ok(q)
    }

    /// Deletes `queue` with what the server keeps of it (`deletion.rs`), and forgets this
    /// server's handle of it.
    pub async fn delete_queue(&self, queue: &Queue, force: bool) -> delayq::Result<Deleted> {
        let deleted = crate::deletion::delete_queue(self.dq(), queue, force).await?;
        let mut queues = self.0.queues.lock().unwrap_or_else(|p| p.into_inner());
        queues.remove(queue.name().as_str());
        Ok(deleted)
    }

    /// The event hubs of this server.
    pub fn event_hubs(&self) -> &EventHubs {
        &self.0.event_hubs
    }

    /// The dashboard sessions' secret: 32 random bytes, made once (`SET NX`) and kept in
    /// Redis for every server of it; read once per process.
    pub async fn session_secret(&self) -> ApiResult<&[u8]> {
        let secret = self
            .0
            .session_secret
            .get_or_try_init(|| async {
                let mut conn = self.0.dq.redis();
                let made = crate::push::signature::hex(&rand::random::<[u8; 32]>());
                let _: Option<String> = redis::cmd("SET")
                    .arg(SESSION_SECRET_KEY)
                    .arg(&made)
                    .arg("NX")
                    .query_async(&mut conn)
                    .await
                    .map_err(delayq::Error::from)?;
                let kept: Option<String> = redis::cmd("GET")
                    .arg(SESSION_SECRET_KEY)
                    .query_async(&mut conn)
                    .await
                    .map_err(delayq::Error::from)?;
                Ok::<_, crate::error::ApiError>(kept.unwrap_or(made).into_bytes())
            })
            .await?;
        Ok(secret)
    }

    /// What the audit log says this state's API requests came through (`api` unless set).
    pub fn audit_via(&self) -> &'static str {
        self.0.audit_via.get().copied().unwrap_or("api")
    }

    /// Sets what the audit log says the requests came through (once).
    pub fn set_audit_via(&self, via: &'static str) {
        let _ = self.0.audit_via.set(via);
    }

    /// A place for one more event stream of `holder` (429 beyond the caps).
    pub fn take_stream_slot(&self, holder: Holder) -> ApiResult<StreamSlot> {
        let limits = &self.0.limits;
        crate::streams::stream_slots::take(
            &self.0.stream_slots,
            holder,
            limits.max_event_streams_per_token,
            limits.max_event_streams,
        )
    }

    /// Checks the request's token for `role` (see [`Tokens::authorize`]): who it is.
    pub fn authorize(
        &self,
        headers: &axum::http::HeaderMap,
        role: Role,
    ) -> ApiResult<Option<Caller>> {
        self.tokens().authorize(headers, role)
    }

    /// Checks that the request carries a valid token, whatever its role.
    pub fn authenticate(&self, headers: &axum::http::HeaderMap) -> ApiResult<()> {
        self.tokens().authenticate(headers).map(drop)
    }

    /// Where deaths are reported for their failure callbacks, once push delivery runs.
    pub fn callbacks(&self) -> Option<&Callbacks> {
        self.0.callbacks.get()
    }

    /// Sets where deaths are reported (once; later calls change nothing).
    pub fn set_callbacks(&self, callbacks: Callbacks) {
        let _ = self.0.callbacks.set(callbacks);
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
