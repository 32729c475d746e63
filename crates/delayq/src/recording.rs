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

use metrics::{counter, histogram, Counter, Histogram};

use crate::names::QueueName;

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

/// One queue's metric handles, registered once when the queue handle is made.
pub(crate) struct QueueMetrics {
    pub(crate) sent: Counter,
    pub(crate) delivered: Counter,
    pub(crate) acked: Counter,
    pub(crate) nacked: Counter,
    pub(crate) retried: Counter,
    pub(crate) dead_lettered: Counter,
    pub(crate) lease_expired: Counter,
    pub(crate) cancelled: Counter,
    pub(crate) expired: Counter,
    pub(crate) lateness: Histogram,
    pub(crate) handler_duration: Histogram,
}

impl QueueMetrics {
    pub(crate) fn new(queue: &QueueName) -> Self {
        let q = queue.as_str().to_owned();
        QueueMetrics {
            sent: counter!("delayq_messages_sent_total", "queue" => q.clone()),
            delivered: counter!("delayq_messages_delivered_total", "queue" => q.clone()),
            acked: counter!("delayq_messages_acked_total", "queue" => q.clone()),
            nacked: counter!("delayq_messages_nacked_total", "queue" => q.clone()),
            retried: counter!("delayq_messages_retried_total", "queue" => q.clone()),
            dead_lettered: counter!("delayq_messages_dead_lettered_total", "queue" => q.clone()),
            lease_expired: counter!("delayq_messages_lease_expired_total", "queue" => q.clone()),
            cancelled: counter!("delayq_messages_cancelled_total", "queue" => q.clone()),
            expired: counter!("delayq_messages_expired_total", "queue" => q.clone()),
            lateness: histogram!("delayq_delivery_lateness_seconds", "queue" => q.clone()),
            handler_duration: histogram!("delayq_handler_duration_seconds", "queue" => q),
        }
    }
}
