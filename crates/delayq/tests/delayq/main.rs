//! delayq's integration tests: one test binary (one link step), every test against a real
//! `redis-server` that the fixture starts on a free loopback port.

mod common;

// Queue operations, input checks, retries and dead letters, leases, cluster mode.
mod ack_carry;
mod acl;
mod bad_input;
mod browse;
mod buckets;
mod claim_cost;
mod claim_leases;
mod claim_spacing;
mod cluster;
mod data_set_files;
mod data_set_groups;
mod data_set_sealed;
mod data_sets;
mod dead_letters;
mod encryption;
mod error_history;
mod events;
mod expiry;
mod formats;
mod functions;
mod group_rates;
mod group_settings;
mod groups;
mod history;
mod idempotency;
mod leases;
mod look_ahead;
mod max_delay;
mod memory;
mod multi_queue;
mod ops;
mod ops_by_id;
mod partitions;
mod pause;
mod persistence;
mod priority;
mod push_mode;
mod queue_delete;
mod rate_limit;
mod registry;
mod retention;
mod schedule_firing;
mod schedules;
mod servers;
mod trace_context;
mod upserts;

// Runtime behaviour under load and faults.
mod concurrency;
mod durability;
mod half_open;
mod sentinel;
mod timing;
mod wakeups;
mod worker;
mod worker_helpers;
mod worker_leases;
mod worker_stop;
