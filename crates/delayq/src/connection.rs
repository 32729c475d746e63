//! Connections to Redis, and the rules they follow.
//!
//! * Ordinary traffic (sends, claims, acks) goes through one multiplexed, reconnecting
//!   connection with an explicit response timeout ([`Config::response_timeout`]), shared by
//!   every clone of a [`DelayQ`](crate::DelayQ) and its queues.
//! * A blocking wait (`BLPOP` on a queue's wake-up list) gets a connection of its own whose
//!   response timeout is longer than any block delayq issues. redis-rs 1.x gives up on a reply
//!   after 500 ms by default; a blocking command that outlives that is abandoned by the client
//!   while Redis still pops for it. delayq never pops messages with a blocking command (only
//!   wake-up tokens), but a timed-out wait would still strand the connection, so the rule holds.

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use crate::error::Result;
use crate::options::Config;

/// Longest single blocking wait. Waits for longer are chunked; nothing due depends on this
/// timeout firing on time (Redis fires block timeouts on its `hz` timer, up to ~100 ms late).
pub(crate) const MAX_BLOCK: Duration = Duration::from_secs(10);

/// The ordinary, shared connection.
pub(crate) async fn ordinary(client: &redis::Client, config: &Config) -> Result<ConnectionManager> {
    let cfg = base_config(config).set_response_timeout(Some(config.response_timeout));
    Ok(ConnectionManager::new_with_config(client.clone(), cfg).await?)
}

/// A connection for blocking waits only.
pub(crate) async fn blocking(client: &redis::Client, config: &Config) -> Result<ConnectionManager> {
    let cfg = base_config(config).set_response_timeout(Some(MAX_BLOCK + Duration::from_secs(5)));
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
