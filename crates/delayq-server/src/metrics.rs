//! Prometheus metrics: the library's counters and histograms (see `delayq`'s `recording`
//! module for their names), plus per-queue gauges of messages by state, read from Redis when
//! scraped and cached for a second so that scrapers cannot hammer Redis.

use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::error::ApiResult;
use crate::state::AppState;

/// How long gauges read from Redis are reused.
const GAUGE_TTL: Duration = Duration::from_secs(1);

/// Installs the process-wide Prometheus recorder (once; later calls return the same
/// handle). Call it before making queue handles: they register their metrics when made.
pub fn install() -> Result<PrometheusHandle, String> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("delayq_delivery_lateness_seconds".into()),
                    delayq::LATENESS_BUCKETS,
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("delayq_handler_duration_seconds".into()),
                        delayq::HANDLER_BUCKETS,
                    )
                })
                .map_err(|e| e.to_string())?
                .install_recorder()
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// When the gauges were last read from Redis.
#[derive(Default)]
pub struct GaugeCache(Mutex<Option<Instant>>);

/// The Prometheus text: gauges refreshed if older than a second, then everything rendered.
pub async fn render(state: &AppState, handle: &PrometheusHandle) -> ApiResult<String> {
    let stale = {
        let last = state
            .gauge_cache()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        last.is_none_or(|t| t.elapsed() > GAUGE_TTL)
    };
    if stale {
        for name in state.dq().queues().await? {
            let s = state.queue(name.as_str())?.stats().await?;
            let q = name.to_string();
            for (st, n) in [
                ("delayed", s.delayed),
                ("ready", s.ready),
                ("in_flight", s.in_flight),
                ("dead", s.dead),
            ] {
                metrics::gauge!("delayq_messages", "queue" => q.clone(), "state" => st)
                    .set(n as f64);
            }
            metrics::gauge!("delayq_oldest_ready_lag_seconds", "queue" => q)
                .set(s.oldest_ready_lag_ms as f64 / 1000.0);
        }
        *state
            .gauge_cache()
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }
    Ok(handle.render())
}
