//! What delayq records through the [`metrics`] facade: per-queue counters of what happened to
//! messages, the lateness of deliveries, and handler durations. The library installs no
//! exporter; an application (like `delayq serve`) installs one, before it creates its queue
//! handles, and every queue records into it. Without one, recording costs next to nothing.
//!
//! | metric | kind | labels |
//! |---|---|---|
//! | `delayq_messages_sent_total` | counter | queue |
//! | `delayq_messages_delivered_total` | counter | queue |
//! | `delayq_messages_acked_total` | counter | queue |
//! | `delayq_messages_nacked_total` | counter | queue |
//! | `delayq_messages_retried_total` | counter | queue (nacks and lease expiries that retry) |
//! | `delayq_messages_dead_lettered_total` | counter | queue |
//! | `delayq_messages_lease_expired_total` | counter | queue (reclaimed by a claim) |
//! | `delayq_messages_cancelled_total` | counter | queue |
//! | `delayq_messages_expired_total` | counter | queue |
//! | `delayq_delivery_lateness_seconds` | histogram | queue: claim time minus due time, server clock |
//! | `delayq_handler_duration_seconds` | histogram | queue (worker handlers) |
//! | `delayq_schedule_ticks_refused_total` | counter | queue (ticks the queue refused: skipped) |
//!
//! A queue's series are made when it first counts something, for at most
//! [`MAX_QUEUES_WITH_SERIES`] queues per process.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, OnceLock};

use metrics::{counter, histogram, Counter, Histogram};

use crate::values::names::QueueName;

/// Bucket bounds for lateness, 0.5 ms to 1 h (for exporters that need them).
pub const LATENESS_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 900.0, 3600.0,
];

/// Bucket bounds for handler durations, 1 ms to 10 min.
pub const HANDLER_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

/// Every metric the library records, with its help text (Prometheus's `# HELP`).
const DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "delayq_messages_sent_total",
        "Messages sent (accepted into Redis) by this process.",
    ),
    (
        "delayq_messages_delivered_total",
        "Messages this process claimed for a consumer.",
    ),
    (
        "delayq_messages_acked_total",
        "Deliveries this process acknowledged.",
    ),
    (
        "delayq_messages_nacked_total",
        "Deliveries this process reported failed.",
    ),
    (
        "delayq_messages_retried_total",
        "Messages scheduled for another attempt (nacks and lease expiries that retry).",
    ),
    (
        "delayq_messages_dead_lettered_total",
        "Messages moved to the dead-letter set (attempts used up, or expired).",
    ),
    (
        "delayq_messages_lease_expired_total",
        "Leases that ran out before an ack, taken back by this process's claims.",
    ),
    (
        "delayq_messages_cancelled_total",
        "Messages cancelled through this process.",
    ),
    (
        "delayq_messages_expired_total",
        "Messages whose deadline passed before delivery.",
    ),
    (
        "delayq_schedule_ticks_refused_total",
        "Schedule ticks the queue refused (skipped), e.g. over its max delay.",
    ),
];

/// Every histogram the library records, with its help text.
const HISTOGRAM_DESCRIPTIONS: &[(&str, &str)] = &[
    (
        "delayq_delivery_lateness_seconds",
        "Claim time minus due time of each delivery, by the Redis server's clock.",
    ),
    (
        "delayq_handler_duration_seconds",
        "How long worker handlers ran, from delivery to ack or nack.",
    ),
];

/// Gives each metric the library records its help text, for exporters that show one (the
/// Prometheus text's `# HELP` lines). Call it once after installing a recorder.
pub fn describe_metrics() {
    for (name, help) in DESCRIPTIONS {
        metrics::describe_counter!(*name, *help);
    }
    for (name, help) in HISTOGRAM_DESCRIPTIONS {
        metrics::describe_histogram!(*name, metrics::Unit::Seconds, *help);
    }
}

/// Most queues one process makes series for. A queue beyond it counts nothing (with one
/// warning), so that a process handed ever new queue names (an HTTP server whose clients
/// invent them) cannot grow its metrics without bound.
pub const MAX_QUEUES_WITH_SERIES: usize = 10_000;

/// The queues with series in this process.
static WITH_SERIES: SeriesBudget = SeriesBudget::new(MAX_QUEUES_WITH_SERIES);

/// Whether `queue` may have series: it has some already, or there is room for it.
fn admit(queue: &str) -> bool {
    let admitted = WITH_SERIES.admit(queue);
    if !admitted {
        static WARNED: std::sync::Once = std::sync::Once::new();
        WARNED.call_once(|| {
            tracing::warn!(
                "{MAX_QUEUES_WITH_SERIES} queues have metric series in this process: \
                 queues beyond them are not counted"
            )
        });
    }
    admitted
}

/// The queues that have series, up to a cap.
struct SeriesBudget {
    cap: usize,
    names: Mutex<Option<HashSet<String>>>,
}

impl SeriesBudget {
    const fn new(cap: usize) -> Self {
        SeriesBudget {
            cap,
            names: Mutex::new(None),
        }
    }

    /// True if `queue` has series or may have them now (then it is counted in).
    fn admit(&self, queue: &str) -> bool {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let names = names.get_or_insert_with(HashSet::new);
        if names.contains(queue) {
            return true;
        }
        if names.len() >= self.cap {
            return false;
        }
        names.insert(queue.to_owned());
        true
    }
}

/// A series of one queue (a counter, a histogram), registered when it first counts
/// something: a queue handle made only to read (or for a name a client invented) makes
/// none.
pub(crate) struct Lazy<H> {
    name: &'static str,
    queue: Arc<str>,
    register: fn(&'static str, String) -> H,
    handle: OnceLock<Option<H>>,
}

impl<H> Lazy<H> {
    fn new(name: &'static str, queue: &Arc<str>, register: fn(&'static str, String) -> H) -> Self {
        Lazy {
            name,
            queue: queue.clone(),
            register,
            handle: OnceLock::new(),
        }
    }

    /// The series, registered now if it is not yet (none beyond the budget).
    fn series(&self) -> Option<&H> {
        self.handle
            .get_or_init(|| {
                admit(&self.queue).then(|| (self.register)(self.name, self.queue.to_string()))
            })
            .as_ref()
    }
}

/// A counter of one queue.
pub(crate) type LazyCounter = Lazy<Counter>;
/// A histogram of one queue.
pub(crate) type LazyHistogram = Lazy<Histogram>;

impl Lazy<Counter> {
    fn counter(name: &'static str, queue: &Arc<str>) -> Self {
        Lazy::new(name, queue, |name, queue| counter!(name, "queue" => queue))
    }

    /// Adds `n` (nothing is registered for 0).
    pub(crate) fn increment(&self, n: u64) {
        if n > 0 {
            if let Some(counter) = self.series() {
                counter.increment(n);
            }
        }
    }
}

impl Lazy<Histogram> {
    fn histogram(name: &'static str, queue: &Arc<str>) -> Self {
        Lazy::new(
            name,
            queue,
            |name, queue| histogram!(name, "queue" => queue),
        )
    }

    /// Records one sample.
    pub(crate) fn record(&self, value: f64) {
        if let Some(histogram) = self.series() {
            histogram.record(value);
        }
    }
}

/// One queue's metric handles, each registered when it first counts.
pub(crate) struct QueueMetrics {
    pub(crate) sent: LazyCounter,
    pub(crate) delivered: LazyCounter,
    pub(crate) acked: LazyCounter,
    pub(crate) nacked: LazyCounter,
    pub(crate) retried: LazyCounter,
    pub(crate) dead_lettered: LazyCounter,
    pub(crate) lease_expired: LazyCounter,
    pub(crate) cancelled: LazyCounter,
    pub(crate) expired: LazyCounter,
    pub(crate) schedule_ticks_refused: LazyCounter,
    pub(crate) lateness: LazyHistogram,
    pub(crate) handler_duration: LazyHistogram,
}

impl QueueMetrics {
    pub(crate) fn new(queue: &QueueName) -> Self {
        let q: Arc<str> = Arc::from(queue.as_str());
        QueueMetrics {
            sent: LazyCounter::counter("delayq_messages_sent_total", &q),
            delivered: LazyCounter::counter("delayq_messages_delivered_total", &q),
            acked: LazyCounter::counter("delayq_messages_acked_total", &q),
            nacked: LazyCounter::counter("delayq_messages_nacked_total", &q),
            retried: LazyCounter::counter("delayq_messages_retried_total", &q),
            dead_lettered: LazyCounter::counter("delayq_messages_dead_lettered_total", &q),
            lease_expired: LazyCounter::counter("delayq_messages_lease_expired_total", &q),
            cancelled: LazyCounter::counter("delayq_messages_cancelled_total", &q),
            expired: LazyCounter::counter("delayq_messages_expired_total", &q),
            schedule_ticks_refused: LazyCounter::counter("delayq_schedule_ticks_refused_total", &q),
            lateness: LazyHistogram::histogram("delayq_delivery_lateness_seconds", &q),
            handler_duration: LazyHistogram::histogram("delayq_handler_duration_seconds", &q),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::SeriesBudget;

    #[test]
    fn queues_beyond_the_budget_get_no_series_and_those_within_keep_theirs() {
        let budget = SeriesBudget::new(2);
        assert!(budget.admit("a"));
        assert!(budget.admit("b"));
        assert!(!budget.admit("c"), "a third queue is over a budget of 2");
        assert!(budget.admit("a"), "a queue with series keeps them");
    }
}
