//! The messages a consumer's claims took ahead of their due time
//! ([`Config::look_ahead`](crate::Config::look_ahead)): held under their lease until the
//! moment each comes due, then handed over by the consumer's next `receive`.
//!
//! Each waits until the instant its claim's reply arrived plus the time the claim said was
//! left before it came due, by the Redis server's clock. Redis read its clock before the reply
//! left, so that instant is never before the due time: a message taken ahead is late by the
//! reply's way back at most, and never early.

use std::time::Duration;

use tokio::time::Instant;

/// Deliveries (`D`) waiting for their due time, each with the position of its queue in the
/// consumer's set.
pub(crate) struct TakenAhead<D> {
    /// In the order they come due.
    waiting: Vec<(Instant, usize, D)>,
}

impl<D> Default for TakenAhead<D> {
    fn default() -> Self {
        TakenAhead {
            waiting: Vec::new(),
        }
    }
}

impl<D> TakenAhead<D> {
    /// Keeps `delivery` (of the queue at `position`) until `due_in` after `replied`.
    pub(crate) fn hold(
        &mut self,
        replied: Instant,
        due_in: Duration,
        position: usize,
        delivery: D,
    ) {
        let at = replied + due_in;
        let i = self.waiting.partition_point(|(t, _, _)| *t <= at);
        self.waiting.insert(i, (at, position, delivery));
    }

    /// Up to `max` of those due by `now`, in the order they came due.
    pub(crate) fn take_due(&mut self, now: Instant, max: usize) -> Vec<(usize, D)> {
        let due = self.waiting.partition_point(|(t, _, _)| *t <= now).min(max);
        self.waiting
            .drain(..due)
            .map(|(_, position, d)| (position, d))
            .collect()
    }

    /// When the next one comes due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.waiting.first().map(|(t, _, _)| *t)
    }

    /// How many wait.
    pub(crate) fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether none waits.
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// All that wait, to be released.
    pub(crate) fn take_all(&mut self) -> Vec<(usize, D)> {
        self.waiting
            .drain(..)
            .map(|(_, position, d)| (position, d))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_over_in_due_order_and_only_once_due() {
        let replied = Instant::now();
        let mut ahead = TakenAhead::<u64>::default();
        ahead.hold(replied, Duration::from_millis(3), 0, 3);
        ahead.hold(replied, Duration::from_millis(1), 1, 1);
        ahead.hold(replied, Duration::from_millis(2), 0, 2);
        assert_eq!(ahead.next_due(), Some(replied + Duration::from_millis(1)));
        assert!(ahead.take_due(replied, 10).is_empty());
        let two = ahead.take_due(replied + Duration::from_millis(2), 10);
        assert_eq!(two, [(1, 1), (0, 2)]);
        assert_eq!(ahead.len(), 1);
        let capped = ahead.take_due(replied + Duration::from_millis(9), 0);
        assert!(capped.is_empty());
        assert_eq!(ahead.take_all().len(), 1);
        assert_eq!(ahead.next_due(), None);
    }
}
