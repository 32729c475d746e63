//! When a consumer sends its claim for a known due time: a little early, by half the recent
//! claim round trip ([`Lead`]), after a wait precise to well under a millisecond
//! ([`sleep_precisely`]): tokio's timer has 1 ms granularity, so the last stretch of a wait
//! is slept on a blocking-pool thread.

use std::time::Duration;

use tokio::time::Instant;

/// Half the recent claim round trip (the request's way to Redis), capped at 1 ms: how early to
/// send a claim for a known due time.
#[derive(Debug)]
pub(crate) struct Lead {
    round_trip_us: f64,
}

impl Default for Lead {
    fn default() -> Self {
        Lead {
            round_trip_us: 200.0,
        }
    }
}

impl Lead {
    pub(crate) fn observe(&mut self, round_trip: Duration) {
        // A slow outlier (a busy machine, a big batch) moves the average only a little.
        let us = (round_trip.as_secs_f64() * 1e6).min(2_000.0);
        self.round_trip_us += (us - self.round_trip_us) / 8.0;
    }

    pub(crate) fn get(&self) -> Duration {
        Duration::from_micros((self.round_trip_us / 2.0) as u64)
    }
}

/// Sleeps for `duration` with sub-millisecond precision: tokio's timer (1 ms granularity) for
/// all but the last 2 ms, a blocking-pool thread for all but the last 150 µs, and a yielding
/// spin for those, since waking an idle thread costs about that much on a virtual machine.
pub(crate) async fn sleep_precisely(duration: Duration) {
    const COARSE_MARGIN: Duration = Duration::from_millis(2);
    const SPIN: Duration = Duration::from_micros(150);
    let deadline = Instant::now() + duration;
    if duration > COARSE_MARGIN {
        tokio::time::sleep_until(deadline - COARSE_MARGIN).await;
    }
    let rest = deadline.saturating_duration_since(Instant::now());
    if rest > SPIN {
        let _ = tokio::task::spawn_blocking(move || std::thread::sleep(rest - SPIN)).await;
    }
    while Instant::now() < deadline {
        tokio::task::yield_now().await;
    }
}
