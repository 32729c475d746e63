//! Connections to Redis, and the rules they follow.
//!
//! * Ordinary traffic (sends, claims, acks) goes through one multiplexed, reconnecting
//!   connection with an explicit response timeout ([`Config::response_timeout`]), shared by
//!   every clone of a [`DelayQ`](crate::DelayQ) and its queues.
//! * Waiting never blocks a connection: a consumer hears wake-ups on a subscription of its
//!   own (`wakeup.rs`), a RESP3 connection whose pushes carry no response timeout, so a long
//!   wait never runs into one and never holds up other traffic. No message is ever popped by
//!   a blocking command whose reply could be lost.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::Result;
use crate::options::Config;

/// The ordinary, shared connection.
pub(crate) async fn ordinary(client: &redis::Client, config: &Config) -> Result<ConnectionManager> {
    let cfg = base_config(config).set_response_timeout(Some(config.response_timeout));
    Ok(ConnectionManager::new_with_config(client.clone(), cfg).await?)
}

fn base_config(config: &Config) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connection_timeout))
        // Reconnects are retried by the caller (the worker backs off and carries on); a short
        // in-place retry keeps a dead Redis from stalling each request for long.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}
