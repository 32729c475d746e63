//! The workload definitions shared by driver and agents (WORKLOADS.md "Workloads"): ids,
//! sizes, delays and the payload format. Kept in one place so both sides cannot disagree.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Result;

/// Payload length in bytes, exactly.
pub const PAYLOAD_LEN: usize = 100;
/// Messages per bulk call.
pub const BATCH_SIZE: usize = 1000;
/// W3: one message every 5 ms (200 msg/s).
pub const W3_INTERVAL_MS: u64 = 5;
/// W3: delay of every message.
pub const W3_DELAY_MS: u64 = 500;
/// W4: delay of every message (1 h), so nothing comes due during the measurement.
pub const W4_DELAY_MS: u64 = 3_600_000;
/// The queue every agent uses (W3q: three queues named after it, `bench.0` to `bench.2`).
pub const QUEUE_NAME: &str = "bench";
/// W3q: the weights of its three queues in the consumer's worker.
pub const W3Q_WEIGHTS: [u32; 3] = [6, 3, 1];

/// A workload id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Workload {
    /// Delayed burst: 100k messages due uniformly over 1–6 s.
    W1,
    /// Immediate throughput, produce then consume.
    W2a,
    /// Immediate throughput, concurrent.
    W2b,
    /// Precision: 200 msg/s, 500 ms delay.
    W3,
    /// W3 through three queues (message `seq` on queue `seq % 3`) and one worker serving
    /// them by weight: the lateness of a multi-queue wait. Not in WORKLOADS.md: delayq's own.
    W3q,
    /// Memory per pending message: 1M messages due in an hour, no consumer.
    W4,
}

impl Workload {
    /// Every workload, in run order.
    pub const ALL: [Workload; 6] = [
        Workload::W1,
        Workload::W2a,
        Workload::W2b,
        Workload::W3,
        Workload::W3q,
        Workload::W4,
    ];

    /// The id as the protocol spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::W1 => "W1",
            Workload::W2a => "W2a",
            Workload::W2b => "W2b",
            Workload::W3 => "W3",
            Workload::W3q => "W3q",
            Workload::W4 => "W4",
        }
    }

    /// N before scaling.
    pub fn base_n(self) -> u64 {
        match self {
            Workload::W1 | Workload::W2a | Workload::W2b => 100_000,
            Workload::W3 | Workload::W3q => 2_000,
            Workload::W4 => 1_000_000,
        }
    }

    /// N after scaling: `SCALE` multiplies every N, never below 100.
    pub fn scaled_n(self, scale: f64) -> u64 {
        ((self.base_n() as f64 * scale).round() as u64).max(100)
    }

    /// Whether consumers take part (W4 measures memory with nothing consuming).
    pub fn has_consumers(self) -> bool {
        self != Workload::W4
    }

    /// Whether the producer uses the bulk API (all but W3 and W3q, one send per call).
    pub fn bulk(self) -> bool {
        !self.paced()
    }

    /// W3 and W3q: one message every 5 ms, lateness is what they measure.
    pub fn paced(self) -> bool {
        matches!(self, Workload::W3 | Workload::W3q)
    }

    /// The queues the workload uses.
    pub fn queue_names(self) -> Vec<String> {
        match self {
            Workload::W3q => (0..W3Q_WEIGHTS.len())
                .map(|i| format!("{QUEUE_NAME}.{i}"))
                .collect(),
            _ => vec![QUEUE_NAME.to_owned()],
        }
    }

    /// The delay asked for message `seq`; `None` is the immediate path (delay omitted).
    pub fn delay_ms(self, seq: u64) -> Option<u64> {
        match self {
            Workload::W1 => Some(w1_delay_ms(seq)),
            Workload::W2a | Workload::W2b => None,
            Workload::W3 | Workload::W3q => Some(W3_DELAY_MS),
            Workload::W4 => Some(W4_DELAY_MS),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Workload {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Workload::ALL
            .into_iter()
            .find(|w| w.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| format!("unknown workload {s:?} (expected W1, W2a, W2b, W3, W3q or W4)"))
    }
}

/// The integer hash of WORKLOADS.md, all arithmetic on wrapping u32.
pub fn lowbias32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// W1's delay of message `seq`: integer ms in [1000, 6000].
pub fn w1_delay_ms(seq: u64) -> u64 {
    // seq < 2^32 for every scale that fits in memory; the contract hashes it as u32.
    1000 + u64::from(lowbias32(seq as u32)) % 5001
}

/// The 100-byte payload `<seq>:<due_ms with 3 decimals>:xxx…`.
pub fn payload(seq: u64, due_ms: f64) -> Result<Vec<u8>> {
    let mut p = format!("{seq}:{due_ms:.3}:").into_bytes();
    if p.len() > PAYLOAD_LEN {
        return Err(
            format!("payload header of seq {seq} is longer than {PAYLOAD_LEN} bytes").into(),
        );
    }
    p.resize(PAYLOAD_LEN, b'x');
    Ok(p)
}

/// `(seq, due_ms)` back out of a payload; `None` if it is not one of ours.
pub fn parse_payload(payload: &[u8]) -> Option<(u64, f64)> {
    let text = std::str::from_utf8(payload).ok()?;
    let mut parts = text.splitn(3, ':');
    let seq = parts.next()?.parse().ok()?;
    let due = parts.next()?.parse().ok()?;
    Some((seq, due))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lowbias32_check_values() {
        let got: Vec<u64> = [0, 1, 2, 12345, 99999].map(w1_delay_ms).to_vec();
        assert_eq!(got, vec![1000, 1253, 1507, 4678, 4515]);
    }

    #[test]
    fn w1_mean_delay() {
        let sum: u64 = (0..100_000).map(w1_delay_ms).sum();
        let mean = sum as f64 / 100_000.0;
        assert!((mean - 3499.6).abs() < 0.05, "mean {mean}");
    }

    #[test]
    fn w1_delays_in_range() {
        assert!((0..100_000)
            .map(w1_delay_ms)
            .all(|d| (1000..=6000).contains(&d)));
    }

    #[test]
    fn payload_round_trip() -> Result<()> {
        let p = payload(42, 1_763_805_600_123.456)?;
        assert_eq!(p.len(), PAYLOAD_LEN);
        assert!(p.starts_with(b"42:1763805600123.456:xxx"));
        assert!(p[21..].iter().all(|&b| b == b'x'));
        assert_eq!(parse_payload(&p), Some((42, 1_763_805_600_123.456)));
        Ok(())
    }

    #[test]
    fn foreign_payloads_are_rejected() {
        assert_eq!(parse_payload(b"hello"), None);
        assert_eq!(parse_payload(b"1:x:y"), None);
        assert_eq!(parse_payload(&[0xff, b':', b'1']), None);
    }

    #[test]
    fn scaling() {
        assert_eq!(Workload::W4.scaled_n(0.01), 10_000);
        assert_eq!(Workload::W3.scaled_n(0.01), 100);
        assert_eq!(Workload::W1.scaled_n(1.0), 100_000);
    }

    #[test]
    fn workload_ids_parse() {
        for w in Workload::ALL {
            assert_eq!(w.as_str().parse::<Workload>(), Ok(w));
        }
        assert!("W5".parse::<Workload>().is_err());
    }
}
