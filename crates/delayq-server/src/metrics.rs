//! Prometheus metrics: the library's counters and histograms (see `delayq`'s `recording`
//! module for their names), plus per-queue gauges of messages by state, read from Redis when
//! scraped and cached for a second so that scrapers cannot hammer Redis, and
//! `delayq_redis_up`, whether that reading reached Redis: a scrape answers while Redis does
//! not, so that "Redis unavailable" can be alerted on apart from "delayq down".

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use delayq::Stats;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use metrics_util::MetricKindMask;

use crate::error::ApiResult;

/// How long gauges read from Redis are reused.
const GAUGE_TTL: Duration = Duration::from_secs(1);

/// A gauge not set again for this long is dropped. Each scrape sets those of every queue
/// there is (and the server's own) just before it renders, so this drops the gauges of a
/// queue that is gone (deleted): it must not say its last counts forever. While Redis is
/// away the queues' gauges go too, with `delayq_redis_up` 0.
const GAUGE_IDLE: Duration = Duration::from_secs(10);

/// How often histogram samples are folded into their buckets. The recorder keeps every raw
/// sample until a scrape or an upkeep does that, so a server nobody scraped grew by every
/// delivery's lateness: 28 KB/s at 5,000 msgs/s, found by the soak run.
const UPKEEP_EVERY: Duration = Duration::from_secs(1);

/// Upkeeps run so far (tests wait on it).
static UPKEEPS: AtomicU64 = AtomicU64::new(0);

/// Installs the process-wide Prometheus recorder (once; later calls return the same
/// handle). Call it before making queue handles: they register their metrics when made.
pub fn install() -> Result<PrometheusHandle, String> {
    static HANDLE: OnceLock<Result<PrometheusHandle, String>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            PrometheusBuilder::new()
                .idle_timeout(MetricKindMask::GAUGE, Some(GAUGE_IDLE))
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
                // Histograms, not summaries, so that several servers' add up (a summary's
                // quantiles cannot be combined), as the dashboard in deploy/ does.
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("delayq_push_lateness_seconds".into()),
                        delayq::LATENESS_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("delayq_push_request_seconds".into()),
                        delayq::HANDLER_BUCKETS,
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full(crate::http_metrics::REQUEST_SECONDS.into()),
                        HTTP_BUCKETS,
                    )
                })
                .map_err(|e| e.to_string())?
                .install_recorder()
                .map_err(|e| e.to_string())
                .and_then(spawn_upkeep)
                .inspect(|_| describe())
        })
        .clone()
}

/// Bucket bounds for HTTP requests, 0.5 ms to 60 s (a long poll waits up to 30 s).
const HTTP_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// The server's own metrics, with their help texts (`# HELP`); the library's are described
/// by [`delayq::describe_metrics`].
const GAUGES: &[(&str, &str)] = &[
    (
        "delayq_messages",
        "Messages of the queue by state, read from Redis (the same on every server of one Redis).",
    ),
    (
        "delayq_oldest_ready_lag_seconds",
        "How long the queue's oldest ready message has been due, read from Redis.",
    ),
    (
        "delayq_overdue_messages",
        "Messages held past the end of their lease (their consumer died or stalled), read from Redis.",
    ),
    (
        "delayq_oldest_overdue_seconds",
        "How long ago the oldest overdue lease ended, read from Redis (0: none).",
    ),
    ("delayq_queue_paused", "1 while the queue is paused, read from Redis."),
    ("delayq_data_format", "The data format of the queue in Redis (the oldest of its partitions')."),
    ("delayq_redis_up", "1 when this server's last reading of the queues reached Redis."),
    ("delayq_build_info", "Always 1: the server's version and newest data format as labels."),
];
const COUNTERS: &[(&str, &str)] = &[
    (
        "delayq_push_requests_total",
        "Push deliveries by queue, target host and outcome class.",
    ),
    (
        "delayq_push_callbacks_total",
        "Dead-letter callbacks by queue and outcome.",
    ),
    (
        "delayq_webhook_requests_total",
        "Webhook requests by queue and outcome.",
    ),
];
const HISTOGRAMS: &[(&str, &str)] = &[
    (
        "delayq_push_lateness_seconds",
        "Push time minus due time, by the Redis server's clock.",
    ),
    (
        "delayq_push_request_seconds",
        "How long push targets took to answer.",
    ),
    (
        crate::http_metrics::REQUEST_SECONDS,
        "HTTP requests by method, route template and status: time to the response's head.",
    ),
];

/// Gives every metric its help text, and sets `delayq_build_info`.
fn describe() {
    delayq::describe_metrics();
    for (name, help) in GAUGES {
        metrics::describe_gauge!(*name, *help);
    }
    for (name, help) in COUNTERS {
        metrics::describe_counter!(*name, *help);
    }
    for (name, help) in HISTOGRAMS {
        metrics::describe_histogram!(*name, metrics::Unit::Seconds, *help);
    }
    set_build_info();
}

/// `delayq_build_info`: set at every refresh of the gauges, as they are dropped when idle.
fn set_build_info() {
    metrics::gauge!("delayq_build_info", "version" => env!("CARGO_PKG_VERSION"),
        "data_format" => delayq::DATA_FORMAT.to_string())
    .set(1.0);
}

/// Runs the recorder's upkeep every [`UPKEEP_EVERY`] for the life of the process, on a thread
/// of its own: the recorder may be installed before (or without) a Tokio runtime.
fn spawn_upkeep(handle: PrometheusHandle) -> Result<PrometheusHandle, String> {
    let upkeep = handle.clone();
    std::thread::Builder::new()
        .name("metrics-upkeep".into())
        .spawn(move || loop {
            std::thread::sleep(UPKEEP_EVERY);
            upkeep.run_upkeep();
            UPKEEPS.fetch_add(1, Ordering::SeqCst);
        })
        .map_err(|e| format!("cannot start the metrics upkeep thread: {e}"))?;
    Ok(handle)
}

/// When the gauges were last read from Redis.
#[derive(Default)]
pub struct GaugeCache(Mutex<Option<Instant>>);

/// The Prometheus text: the queues' gauges refreshed from `read_stats` (every queue's name
/// and stats) if they are older than a second, then everything rendered.
pub async fn render<Read, Fut>(
    gauges: &GaugeCache,
    handle: &PrometheusHandle,
    read_stats: Read,
) -> ApiResult<String>
where
    Read: FnOnce() -> Fut,
    Fut: Future<Output = ApiResult<Vec<(String, Stats)>>>,
{
    let stale = {
        let last = gauges.0.lock().unwrap_or_else(|p| p.into_inner());
        last.is_none_or(|t| t.elapsed() > GAUGE_TTL)
    };
    if stale {
        set_build_info();
        let stats = match read_stats().await {
            Ok(stats) => {
                metrics::gauge!("delayq_redis_up").set(1.0);
                stats
            }
            Err(e) => {
                // The last gauges stay as they were read; the next scrape tries again.
                tracing::warn!(status = %e.status(), "metrics: cannot read the queues from Redis");
                metrics::gauge!("delayq_redis_up").set(0.0);
                return Ok(handle.render());
            }
        };
        for (q, s) in stats {
            for (st, n) in [
                ("delayed", s.delayed),
                ("ready", s.ready),
                ("in_flight", s.in_flight),
                ("dead", s.dead),
            ] {
                metrics::gauge!("delayq_messages", "queue" => q.clone(), "state" => st)
                    .set(n as f64);
            }
            metrics::gauge!("delayq_oldest_ready_lag_seconds", "queue" => q.clone())
                .set(s.oldest_ready_lag_ms as f64 / 1000.0);
            metrics::gauge!("delayq_overdue_messages", "queue" => q.clone()).set(s.overdue as f64);
            metrics::gauge!("delayq_oldest_overdue_seconds", "queue" => q.clone())
                .set(s.oldest_overdue_ms as f64 / 1000.0);
            metrics::gauge!("delayq_queue_paused", "queue" => q.clone())
                .set(f64::from(u8::from(s.paused)));
            metrics::gauge!("delayq_data_format", "queue" => q).set(f64::from(s.data_format));
        }
        *gauges.0.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
    }
    Ok(handle.render())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resident memory of this process, in kB.
    fn rss_kb() -> u64 {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines().find_map(|l| {
                    l.strip_prefix("VmRSS:")?
                        .trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse()
                        .ok()
                })
            })
            .expect("VmRSS in /proc/self/status")
    }

    /// Waits until an upkeep has run since this moment.
    fn wait_for_upkeep() {
        let seen = UPKEEPS.load(Ordering::SeqCst);
        let deadline = Instant::now() + UPKEEP_EVERY * 10;
        while UPKEEPS.load(Ordering::SeqCst) <= seen {
            assert!(Instant::now() < deadline, "no metrics upkeep ran");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn histograms_nobody_scrapes_stay_bounded() {
        let _handle = install().expect("recorder");
        let lateness =
            metrics::histogram!("delayq_delivery_lateness_seconds", "queue" => "unscraped");
        wait_for_upkeep();
        let before = rss_kb();
        for _ in 0..8 {
            for _ in 0..500_000 {
                lateness.record(0.0015);
            }
            wait_for_upkeep();
        }
        // Kept raw, the 4,000,000 samples would hold at least 32 MB.
        let grown = rss_kb().saturating_sub(before);
        assert!(grown < 16 * 1024, "RSS grew by {grown} kB");
    }
}
