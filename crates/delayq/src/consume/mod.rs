//! The consumer side: taking what is due under a lease, and waiting without polling
//! otherwise.
//!
//! * `consumer.rs` ([`Consumer`](crate::Consumer)): receive, over the *lanes* of the queues
//!   it serves (`partition_lane.rs`: one partition of one queue, what the consumer knows of
//!   it, its claim repeated when a reply was lost).
//! * When a lane claims: `when_to_claim.rs` weighs it, from `claim_news.rs` (what this
//!   client's other consumers' claims learned, and their turn) and `claim_timing.rs` (how
//!   early to send a claim, and precise sleeps).
//! * `claim.rs`: one claim (one script call). `choice.rs`: which lane next.
//!   `taken_ahead.rs`: what claims took ahead of its due time, held until then.
//! * The acks a claim carries: `ack_carry.rs` (a worker's finished deliveries) and
//!   `receipt_acks.rs` (receipts given to a receive).

pub(crate) mod ack_carry;
pub(crate) mod choice;
pub(crate) mod claim;
pub(crate) mod claim_news;
pub(crate) mod claim_timing;
pub(crate) mod consumer;
pub(crate) mod partition_lane;
pub(crate) mod receipt_acks;
pub(crate) mod taken_ahead;
pub(crate) mod when_to_claim;
