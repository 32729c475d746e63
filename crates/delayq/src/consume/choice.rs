//! How a consumer of several lanes (the partitions of the queues it serves) chooses the
//! lane it claims from next.
//!
//! * Strict: the first queue of the list with due messages always goes first; a later queue
//!   gets only what is left of a claim.
//! * Weighted: smooth weighted round robin (as nginx balances upstreams) over the queues
//!   that may have due messages. With weights 6, 3, 1 and all three busy, every ten claims
//!   go 6, 3 and 1 to them, interleaved, so a low weight is served steadily, never starved.
//!   A queue known to have nothing due is left out of the rotation, and so gets no credit
//!   for the time it sat idle.
//!
//! Each partition of a queue is a lane of its own (`partitions.rs`). The lanes of one queue
//! share its weight equally and take turns by the same round robin; in a strict set they
//! take turns within their queue's rank.

/// How a set chooses among its queues that have due messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// Always the first in the list.
    Strict,
    /// In proportion to the queues' weights.
    Weighted,
}

/// A queue's weight is split over its partitions in units this fine, so that every
/// partition count up to 16 divides it evenly.
const WEIGHT_UNITS: i64 = 720_720;

/// The weight of each lane of a queue of weight `weight` and `partitions` partitions.
fn lane_weight(weight: u32, partitions: usize) -> i64 {
    (i64::from(weight) * WEIGHT_UNITS / partitions.max(1) as i64).max(1)
}

/// The choosing state of one consumer of a set, over its lanes (the partitions of its
/// queues, queue by queue in the set's order).
#[derive(Debug)]
pub(crate) struct Picker {
    order: Order,
    weights: Vec<i64>,
    /// The position of each lane's queue in the set.
    groups: Vec<usize>,
    /// Smooth weighted round robin credit, per lane.
    credit: Vec<i64>,
}

impl Picker {
    /// For queues of weights `weights`, chosen among by `order`, and lanes given as
    /// (position of their queue, partition count of the queue).
    pub(crate) fn new(order: Order, weights: &[u32], lanes: &[(usize, usize)]) -> Self {
        let lane_weights = lanes
            .iter()
            .map(|&(group, partitions)| lane_weight(weights[group], partitions))
            .collect();
        let groups = lanes.iter().map(|&(group, _)| group).collect();
        Self::with_lanes(order, lane_weights, groups)
    }

    #[cfg(test)]
    fn with_weights(order: Order, weights: Vec<i64>) -> Self {
        let groups = (0..weights.len()).collect();
        Self::with_lanes(order, weights, groups)
    }

    fn with_lanes(order: Order, weights: Vec<i64>, groups: Vec<usize>) -> Self {
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
            groups,
            credit,
        }
    }

    /// The order in which to try the lanes marked `eligible` for one claim: the first gets
    /// the claim, the rest in turn whatever it leaves.
    pub(crate) fn order(&mut self, eligible: &[bool]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..eligible.len()).filter(|&i| eligible[i]).collect();
        if self.order == Order::Weighted {
            self.rotate(&mut order);
            return order;
        }
        // Strict: the first queue with eligible lanes goes first, its lanes taking turns;
        // the other queues follow in the set's order.
        let Some(&first) = order.first() else {
            return order;
        };
        let top = self.groups[first];
        let (mut head, tail): (Vec<usize>, Vec<usize>) =
            order.into_iter().partition(|&i| self.groups[i] == top);
        self.rotate(&mut head);
        head.extend(tail);
        head
    }

    /// Orders `lanes` by smooth weighted round robin: highest credit first; the chosen one
    /// pays the round's total.
    fn rotate(&mut self, lanes: &mut [usize]) {
        if lanes.len() < 2 {
            return;
        }
        let total: i64 = lanes.iter().map(|&i| self.weights[i]).sum();
        for &i in lanes.iter() {
            self.credit[i] += self.weights[i];
        }
        lanes.sort_by_key(|&i| std::cmp::Reverse(self.credit[i]));
        self.credit[lanes[0]] -= total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn picker(weights: &[i64]) -> Picker {
        Picker {
            order: Order::Weighted,
            weights: weights.to_vec(),
            groups: (0..weights.len()).collect(),
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
    fn partitions_of_a_strict_queue_take_turns_in_its_rank() {
        // Queue 0 with three partitions, queue 1 with one.
        let mut p = Picker::with_lanes(Order::Strict, vec![1; 4], vec![0, 0, 0, 1]);
        let firsts: Vec<usize> = (0..60).map(|_| p.order(&[true; 4])[0]).collect();
        for lane in 0..3 {
            // The random first pick may give one lane a turn early.
            let turns = firsts.iter().filter(|&&f| f == lane).count();
            assert!((19..=21).contains(&turns), "{firsts:?}");
        }
        assert_eq!(p.order(&[true; 4])[3], 3, "the lower queue comes last");
        assert_eq!(p.order(&[false, false, false, true]), vec![3]);
    }

    #[test]
    fn a_queue_shares_its_weight_among_its_partitions() {
        // Weights 2 (four partitions) and 1 (one partition).
        let mut weights = vec![lane_weight(2, 4); 4];
        weights.push(lane_weight(1, 1));
        let mut p = Picker::with_lanes(Order::Weighted, weights, vec![0, 0, 0, 0, 1]);
        let mut per_queue = [0; 2];
        for _ in 0..300 {
            per_queue[usize::from(p.order(&[true; 5])[0] == 4)] += 1;
        }
        assert!((198..=202).contains(&per_queue[0]), "{per_queue:?}");
    }

    #[test]
    fn strict_keeps_the_list_order() {
        let mut p = picker(&[1, 1, 1]);
        p.order = Order::Strict;
        assert_eq!(p.order(&[true, true, true]), vec![0, 1, 2]);
        assert_eq!(p.order(&[false, true, true]), vec![1, 2]);
    }
}
