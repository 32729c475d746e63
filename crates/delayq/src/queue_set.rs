//! Several queues served together: which queues, in what order, by what weights; and the
//! rule a consumer of the set follows to choose the queue it claims from next.
//!
//! * Strict: the first queue of the list with due messages always goes first; a later queue
//!   gets only what is left of a claim.
//! * Weighted: smooth weighted round robin (as nginx balances upstreams) over the queues
//!   that may have due messages. With weights 6, 3, 1 and all three busy, every ten claims
//!   go 6, 3 and 1 to them, interleaved, so a low weight is served steadily, never starved.
//!   A queue known to have nothing due is left out of the rotation, and so gets no credit
//!   for the time it sat idle.

use crate::consumer::Consumer;
use crate::error::{InvalidInput, Result};
use crate::queue::Queue;

/// Most queues in one set.
pub const MAX_QUEUES_PER_SET: usize = 64;
/// Highest weight of a queue in a weighted set.
pub const MAX_QUEUE_WEIGHT: u32 = 1000;

/// How a set chooses among its queues that have due messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Always the first in the list.
    Strict,
    /// In proportion to the queues' weights.
    Weighted,
}

/// Queues that one consumer or worker serves together (see the module docs).
#[derive(Clone)]
pub struct QueueSet {
    pub(crate) queues: Vec<(Queue, u32)>,
    pub(crate) order: Order,
}

impl QueueSet {
    /// `queues` in strict priority order, the first highest.
    pub fn strict(queues: impl IntoIterator<Item = Queue>) -> Result<Self> {
        Self::new(queues.into_iter().map(|q| (q, 1)).collect(), Order::Strict)
    }

    /// `queues` served in proportion to their weights (1 to [`MAX_QUEUE_WEIGHT`]).
    pub fn weighted(queues: impl IntoIterator<Item = (Queue, u32)>) -> Result<Self> {
        Self::new(queues.into_iter().collect(), Order::Weighted)
    }

    /// One queue on its own.
    pub fn single(queue: Queue) -> Self {
        QueueSet {
            queues: vec![(queue, 1)],
            order: Order::Strict,
        }
    }

    fn new(queues: Vec<(Queue, u32)>, order: Order) -> Result<Self> {
        let bad = |reason: String| Err(InvalidInput::Option(reason).into());
        if queues.is_empty() || queues.len() > MAX_QUEUES_PER_SET {
            return bad(format!(
                "a queue set holds 1 to {MAX_QUEUES_PER_SET} queues, not {}",
                queues.len()
            ));
        }
        for (i, (queue, weight)) in queues.iter().enumerate() {
            if !(1..=MAX_QUEUE_WEIGHT).contains(weight) {
                return bad(format!(
                    "queue {}: a weight is 1 to {MAX_QUEUE_WEIGHT}, not {weight}",
                    queue.name()
                ));
            }
            if queues[..i].iter().any(|(q, _)| q.name() == queue.name()) {
                return bad(format!("queue {} is in the set twice", queue.name()));
            }
        }
        Ok(QueueSet { queues, order })
    }

    /// The queues, in the order given, with their weights (1 each in a strict set).
    pub fn queues(&self) -> impl Iterator<Item = (&Queue, u32)> {
        self.queues.iter().map(|(q, w)| (q, *w))
    }

    /// How the set chooses among its queues.
    pub fn order(&self) -> Order {
        self.order
    }

    /// A consumer of every queue in the set: each receive waits on all of them at once.
    pub async fn consumer(&self) -> Result<Consumer> {
        Consumer::new(self.clone()).await
    }
}

/// The choosing state of one consumer of a set.
#[derive(Debug)]
pub(crate) struct Picker {
    order: Order,
    weights: Vec<i64>,
    /// Smooth weighted round robin credit, per queue.
    credit: Vec<i64>,
}

impl Picker {
    pub(crate) fn new(set: &QueueSet) -> Self {
        Self::with_weights(
            set.order,
            set.queues.iter().map(|(_, w)| i64::from(*w)).collect(),
        )
    }

    fn with_weights(order: Order, weights: Vec<i64>) -> Self {
        let mut credit = vec![0; weights.len()];
        // A consumer that lives for one receive (an HTTP request) picks only once: from
        // zero credit that would always be the heaviest queue. Starting the rotation at a
        // queue drawn by weight keeps one-shot consumers fair too.
        let total: i64 = weights.iter().sum();
        let mut draw = (rand::random::<f64>() * total as f64) as i64;
        for (i, w) in weights.iter().enumerate() {
            if draw < *w {
                credit[i] = total;
                break;
            }
            draw -= w;
        }
        Picker {
            order,
            weights,
            credit,
        }
    }

    /// The order in which to try the queues marked `eligible` for one claim: the first gets
    /// the claim, the rest in turn whatever it leaves.
    pub(crate) fn order(&mut self, eligible: &[bool]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..eligible.len()).filter(|&i| eligible[i]).collect();
        if self.order == Order::Strict || order.len() < 2 {
            return order;
        }
        let total: i64 = order.iter().map(|&i| self.weights[i]).sum();
        for &i in &order {
            self.credit[i] += self.weights[i];
        }
        // Highest credit first; the chosen one pays the round's total.
        order.sort_by_key(|&i| std::cmp::Reverse(self.credit[i]));
        self.credit[order[0]] -= total;
        order
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker(weights: &[i64]) -> Picker {
        Picker {
            order: Order::Weighted,
            weights: weights.to_vec(),
            credit: vec![0; weights.len()],
        }
    }

    #[test]
    fn weighted_picks_follow_the_weights_interleaved() {
        let mut p = picker(&[6, 3, 1]);
        let firsts: Vec<usize> = (0..10).map(|_| p.order(&[true; 3])[0]).collect();
        let count = |q| firsts.iter().filter(|&&f| f == q).count();
        assert_eq!((count(0), count(1), count(2)), (6, 3, 1));
        // Smooth: the heavy queue never takes the whole round in one run.
        assert!(
            firsts.windows(4).all(|w| w.iter().any(|&f| f != 0)),
            "{firsts:?}"
        );
    }

    #[test]
    fn a_queue_left_out_earns_no_credit() {
        let mut p = picker(&[1, 1]);
        for _ in 0..100 {
            assert_eq!(p.order(&[true, false]), vec![0]);
        }
        let firsts: Vec<usize> = (0..4).map(|_| p.order(&[true, true])[0]).collect();
        assert_eq!(firsts.iter().filter(|&&f| f == 1).count(), 2, "{firsts:?}");
    }

    #[test]
    fn fresh_pickers_start_at_a_queue_drawn_by_weight() {
        let mut firsts = [0usize; 3];
        for _ in 0..10_000 {
            let mut fresh = Picker::with_weights(Order::Weighted, vec![6, 3, 1]);
            firsts[fresh.order(&[true; 3])[0]] += 1;
        }
        for (count, weight) in firsts.iter().zip([6, 3, 1]) {
            let share = *count as f64 / 10_000.0;
            assert!((share - weight as f64 / 10.0).abs() < 0.02, "{firsts:?}");
        }
    }

    #[test]
    fn strict_keeps_the_list_order() {
        let mut p = picker(&[1, 1, 1]);
        p.order = Order::Strict;
        assert_eq!(p.order(&[true, true, true]), vec![0, 1, 2]);
        assert_eq!(p.order(&[false, true, true]), vec![1, 2]);
    }
}
