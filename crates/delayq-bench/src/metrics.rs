//! The numbers of WORKLOADS.md "Results", as pure functions of what the driver collected:
//! lateness percentiles (nearest rank, over all deliveries, duplicates included), loss and
//! duplicate accounting, rates and memory per message.

use std::collections::HashMap;

use serde::Serialize;

use crate::protocol::Produced;

/// One handler invocation, as read from a deliveries file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DeliveryRecord {
    /// The message's seq, from its payload.
    pub seq: u64,
    /// Its due time, from its payload.
    pub due_ms: f64,
    /// When the handler started.
    pub start_ms: f64,
}

/// `used_memory` and `used_memory_dataset` of `INFO memory`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct MemoryInfo {
    /// `used_memory`, bytes.
    pub used_memory: u64,
    /// `used_memory_dataset`, bytes.
    pub used_memory_dataset: u64,
}

/// Distribution of `start_ms − due_ms`, in ms; negative is early, never clipped.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Lateness {
    /// Deliveries measured.
    pub count: u64,
    /// Smallest.
    pub min_ms: Option<f64>,
    /// Median.
    pub p50_ms: Option<f64>,
    /// 90th percentile.
    pub p90_ms: Option<f64>,
    /// 99th percentile.
    pub p99_ms: Option<f64>,
    /// 99.9th percentile.
    pub p999_ms: Option<f64>,
    /// Largest.
    pub max_ms: Option<f64>,
    /// Mean.
    pub mean_ms: Option<f64>,
    /// Deliveries whose handler started before the due time.
    pub early_count: u64,
}

/// Loss and duplicate accounting over seqs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct Accounting {
    /// Handler invocations.
    pub deliveries: u64,
    /// Distinct seqs in `[0, N)`.
    pub unique: u64,
    /// `N − unique`.
    pub lost: u64,
    /// `deliveries − distinct seqs`: extra deliveries.
    pub duplicates: u64,
    /// Seqs delivered more than once, ascending.
    pub dup_ids: Vec<u64>,
    /// Seqs outside `[0, N)`, ascending.
    pub foreign_ids: Vec<u64>,
}

/// Every metric of a workload; `None` where it does not apply.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct Metrics {
    /// `N / enqueue_s`.
    pub enqueue_rate: Option<f64>,
    /// End − start of production, s.
    pub enqueue_s: Option<f64>,
    /// Lateness of all deliveries.
    pub lateness: Option<Lateness>,
    /// Last handler start − production start, s.
    pub drain_s: Option<f64>,
    /// Latest due time − production start, s.
    pub ideal_drain_s: Option<f64>,
    /// Latest − earliest due time, s.
    pub due_window_s: Option<f64>,
    /// `N / drain_s`.
    pub e2e_rate: Option<f64>,
    /// W2a: `N / consume_s`.
    pub consume_rate: Option<f64>,
    /// W2a: last handler start − consumer start signal, s.
    pub consume_s: Option<f64>,
    /// Handler invocations.
    pub deliveries: Option<u64>,
    /// Distinct seqs in `[0, N)`.
    pub unique: Option<u64>,
    /// Messages never delivered.
    pub lost: Option<u64>,
    /// Extra deliveries.
    pub duplicates: Option<u64>,
    /// Seqs delivered more than once.
    pub dup_ids: Option<Vec<u64>>,
    /// Seqs outside `[0, N)`.
    pub foreign_ids: Option<Vec<u64>>,
    /// W4: `used_memory` Δ / N.
    pub bytes_per_msg: Option<f64>,
    /// W4: `used_memory_dataset` Δ / N.
    pub dataset_bytes_per_msg: Option<f64>,
    /// W4: `used_memory` after − before, bytes.
    pub used_memory_delta: Option<i64>,
    /// W4: the system's own pending count afterwards.
    pub pending_after: Option<u64>,
}

/// What the metrics are computed from.
pub struct Inputs<'a> {
    /// N.
    pub n: u64,
    /// Every handler invocation of every consumer; `None` when nothing consumed (W4).
    pub deliveries: Option<&'a [DeliveryRecord]>,
    /// The producer's `produced` event, if it came.
    pub produced: Option<&'a Produced>,
    /// W2a: when the driver told the consumers to start, wall clock ms.
    pub consume_signal_ms: Option<f64>,
    /// W4: memory before and after production.
    pub memory: Option<(MemoryInfo, MemoryInfo)>,
}

/// All metrics.
pub fn compute(inputs: &Inputs<'_>) -> Metrics {
    let n = inputs.n;
    let mut m = Metrics::default();
    if let Some(p) = inputs.produced {
        let enqueue_s = (p.end_ms - p.start_ms) / 1000.0;
        m.enqueue_s = Some(enqueue_s);
        m.enqueue_rate = rate(n, enqueue_s);
        m.ideal_drain_s = Some((p.max_due_ms - p.start_ms) / 1000.0);
        m.due_window_s = Some((p.max_due_ms - p.min_due_ms) / 1000.0);
        m.pending_after = p.pending_after;
    }
    if let Some(deliveries) = inputs.deliveries {
        m.lateness = Some(lateness(deliveries));
        let acc = account(n, deliveries);
        m.deliveries = Some(acc.deliveries);
        m.unique = Some(acc.unique);
        m.lost = Some(acc.lost);
        m.duplicates = Some(acc.duplicates);
        m.dup_ids = Some(acc.dup_ids);
        m.foreign_ids = Some(acc.foreign_ids);
        let last_start = deliveries.iter().map(|d| d.start_ms).reduce(f64::max);
        if let (Some(last), Some(p)) = (last_start, inputs.produced) {
            let drain_s = (last - p.start_ms) / 1000.0;
            m.drain_s = Some(drain_s);
            m.e2e_rate = rate(n, drain_s);
        }
        if let (Some(last), Some(signal)) = (last_start, inputs.consume_signal_ms) {
            let consume_s = (last - signal) / 1000.0;
            m.consume_s = Some(consume_s);
            m.consume_rate = rate(n, consume_s);
        }
    }
    if let Some((before, after)) = inputs.memory {
        let delta = after.used_memory as i64 - before.used_memory as i64;
        let dataset_delta = after.used_memory_dataset as i64 - before.used_memory_dataset as i64;
        m.used_memory_delta = Some(delta);
        m.bytes_per_msg = Some(delta as f64 / n as f64);
        m.dataset_bytes_per_msg = Some(dataset_delta as f64 / n as f64);
    }
    m
}

/// `n` over `seconds`, if any time passed.
pub fn rate(n: u64, seconds: f64) -> Option<f64> {
    (seconds > 0.0).then(|| n as f64 / seconds)
}

/// Lateness distribution of `deliveries`.
pub fn lateness(deliveries: &[DeliveryRecord]) -> Lateness {
    let mut late: Vec<f64> = deliveries.iter().map(|d| d.start_ms - d.due_ms).collect();
    late.sort_by(f64::total_cmp);
    let count = late.len() as u64;
    Lateness {
        count,
        min_ms: late.first().copied(),
        p50_ms: nearest_rank(&late, 500),
        p90_ms: nearest_rank(&late, 900),
        p99_ms: nearest_rank(&late, 990),
        p999_ms: nearest_rank(&late, 999),
        max_ms: late.last().copied(),
        mean_ms: (count > 0).then(|| late.iter().sum::<f64>() / count as f64),
        early_count: late.iter().filter(|&&l| l < 0.0).count() as u64,
    }
}

/// The nearest-rank percentile of ascending `sorted`, with the percentile in per mille
/// (integer, so that 99.9 % is exact): the value at rank ⌈p·len⌉, counting from 1.
pub fn nearest_rank(sorted: &[f64], per_mille: u64) -> Option<f64> {
    let len = sorted.len() as u64;
    if len == 0 {
        return None;
    }
    let rank = (per_mille * len).div_ceil(1000).clamp(1, len);
    sorted.get(rank as usize - 1).copied()
}

/// Loss and duplicates of `deliveries` against seqs `[0, n)`.
pub fn account(n: u64, deliveries: &[DeliveryRecord]) -> Accounting {
    let mut counts: HashMap<u64, u64> = HashMap::with_capacity(deliveries.len());
    for d in deliveries {
        *counts.entry(d.seq).or_default() += 1;
    }
    let unique = counts.keys().filter(|&&s| s < n).count() as u64;
    let mut dup_ids: Vec<u64> = counts
        .iter()
        .filter(|(_, &c)| c > 1)
        .map(|(&s, _)| s)
        .collect();
    dup_ids.sort_unstable();
    let mut foreign_ids: Vec<u64> = counts.keys().copied().filter(|&s| s >= n).collect();
    foreign_ids.sort_unstable();
    Accounting {
        deliveries: deliveries.len() as u64,
        unique,
        lost: n - unique,
        duplicates: deliveries.len() as u64 - counts.len() as u64,
        dup_ids,
        foreign_ids,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(seq: u64, due_ms: f64, start_ms: f64) -> DeliveryRecord {
        DeliveryRecord {
            seq,
            due_ms,
            start_ms,
        }
    }

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<f64> = (1..=1000).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 500), Some(500.0));
        assert_eq!(nearest_rank(&v, 990), Some(990.0));
        assert_eq!(nearest_rank(&v, 999), Some(999.0));
        let v: Vec<f64> = (1..=10).map(f64::from).collect();
        // ⌈0.5·10⌉ = 5, ⌈0.99·10⌉ = 10, ⌈0.999·10⌉ = 10.
        assert_eq!(nearest_rank(&v, 500), Some(5.0));
        assert_eq!(nearest_rank(&v, 990), Some(10.0));
        assert_eq!(nearest_rank(&v, 999), Some(10.0));
        assert_eq!(nearest_rank(&[7.0], 1), Some(7.0));
        assert_eq!(nearest_rank(&[], 500), None);
    }

    #[test]
    fn lateness_keeps_early_deliveries() {
        let l = lateness(&[d(0, 100.0, 90.0), d(1, 100.0, 110.0), d(2, 100.0, 130.0)]);
        assert_eq!(l.count, 3);
        assert_eq!(l.min_ms, Some(-10.0));
        assert_eq!(l.p50_ms, Some(10.0));
        assert_eq!(l.max_ms, Some(30.0));
        assert_eq!(l.mean_ms, Some(10.0));
        assert_eq!(l.early_count, 1);
    }

    #[test]
    fn loss_duplicates_and_foreign_ids() {
        let ds = [
            d(0, 0.0, 0.0),
            d(1, 0.0, 0.0),
            d(1, 0.0, 0.0),
            d(1, 0.0, 0.0),
            d(3, 0.0, 0.0),
            d(3, 0.0, 0.0),
            d(9, 0.0, 0.0),
        ];
        let a = account(5, &ds);
        assert_eq!(a.deliveries, 7);
        assert_eq!(a.unique, 3); // 0, 1, 3
        assert_eq!(a.lost, 2); // 2, 4
        assert_eq!(a.duplicates, 3); // 7 deliveries of 4 distinct seqs
        assert_eq!(a.dup_ids, vec![1, 3]);
        assert_eq!(a.foreign_ids, vec![9]);
    }

    #[test]
    fn rates_and_memory() {
        let p = Produced {
            start_ms: 1000.0,
            end_ms: 1500.0,
            count: 100,
            min_due_ms: 2000.0,
            max_due_ms: 7000.0,
            pending_after: None,
        };
        let ds: Vec<DeliveryRecord> = (0..100).map(|s| d(s, 2000.0, 3000.0)).collect();
        let m = compute(&Inputs {
            n: 100,
            deliveries: Some(&ds),
            produced: Some(&p),
            consume_signal_ms: Some(2000.0),
            memory: None,
        });
        assert_eq!(m.enqueue_rate, Some(200.0));
        assert_eq!(m.drain_s, Some(2.0));
        assert_eq!(m.ideal_drain_s, Some(6.0));
        assert_eq!(m.due_window_s, Some(5.0));
        assert_eq!(m.e2e_rate, Some(50.0));
        assert_eq!(m.consume_rate, Some(100.0));
        assert_eq!(m.lost, Some(0));

        let before = MemoryInfo {
            used_memory: 1000,
            used_memory_dataset: 100,
        };
        let after = MemoryInfo {
            used_memory: 21000,
            used_memory_dataset: 15100,
        };
        let m = compute(&Inputs {
            n: 100,
            deliveries: None,
            produced: None,
            consume_signal_ms: None,
            memory: Some((before, after)),
        });
        assert_eq!(m.bytes_per_msg, Some(200.0));
        assert_eq!(m.dataset_bytes_per_msg, Some(150.0));
        assert_eq!(m.used_memory_delta, Some(20000));
        assert_eq!(m.lost, None);
    }
}
