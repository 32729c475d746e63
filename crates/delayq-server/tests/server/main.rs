//! The delayq server's tests: one test binary, every test against the real server running
//! in-process on `127.0.0.1:0`, over real HTTP, with a real `redis-server` from the fixture.

mod common;

mod auth;
mod browse;
mod browser;
mod cli;
mod cli_settings;
mod config_file;
mod consume;
mod deploy;
mod embedded;
mod errors;
mod event_pages;
mod events;
mod expiry;
mod forged_receipts;
mod formats;
mod front_door;
mod frozen_redis;
mod group_admin;
mod groups;
mod metrics;
mod openapi;
mod otlp;
mod partitions;
mod pause;
mod produce;
mod push;
mod push_callbacks;
mod push_restarts;
mod push_signature;
mod push_targets;
mod push_urls;
mod receiver;
mod retention;
mod rolling_upgrade;
mod schedule_firing;
mod schedules;
mod serve;
mod servers;
mod slow_clients;
mod trace_context;
mod ui;
mod upserts;
mod webhooks;
