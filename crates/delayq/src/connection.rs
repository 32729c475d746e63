//! Connections to Redis, and the rules they follow.
//!
//! * Ordinary traffic (sends, claims, acks) goes through one multiplexed, reconnecting
//!   connection with an explicit response timeout ([`Config::response_timeout`]), shared by
//!   every clone of a [`DelayQ`](crate::DelayQ) and its queues ([`Ordinary`]).
//! * A connection that drops is reconnected by redis-rs. One that stays established while
//!   nothing gets through (half-open: a dead router, a frozen NAT entry) never drops, and
//!   redis-rs would time out on it forever; so a response timeout replaces the connection.
//!   A Redis that is merely slow costs a reconnect, which is cheap.
//! * Waiting never blocks a connection: a consumer hears wake-ups on a subscription of its
//!   own (`wakeup.rs`), a RESP3 connection whose pushes carry no response timeout, so a long
//!   wait never runs into one and never holds up other traffic. No message is ever popped by
//!   a blocking command whose reply could be lost.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::{Cmd, Pipeline, RedisFuture, Value};

use crate::error::Result;
use crate::options::Config;

/// The ordinary, shared connection: cheap to clone, replaced after a response timeout.
#[derive(Clone)]
pub(crate) struct Ordinary(Arc<Shared>);

struct Shared {
    client: redis::Client,
    /// How replacements connect.
    config: ConnectionManagerConfig,
    /// The connection in use, and how many times it has been replaced.
    current: RwLock<(u64, ConnectionManager)>,
}

impl Ordinary {
    /// Connects (and fails if Redis cannot be reached now).
    pub(crate) async fn connect(client: &redis::Client, config: &Config) -> Result<Ordinary> {
        let cfg = base_config(config).set_response_timeout(Some(config.response_timeout));
        let manager = ConnectionManager::new_with_config(client.clone(), cfg.clone()).await?;
        // A replacement is made because Redis did not answer within the response timeout;
        // connecting is given no longer, or a frozen Redis would hold each call for several
        // connection timeouts instead of failing it quickly.
        let impatient = config.connection_timeout.min(config.response_timeout);
        Ok(Ordinary(Arc::new(Shared {
            client: client.clone(),
            config: cfg.set_connection_timeout(Some(impatient)),
            current: RwLock::new((0, manager)),
        })))
    }

    /// A handle for one or more commands.
    pub(crate) fn get(&self) -> Conn {
        let (generation, manager) = self.0.read().clone();
        Conn {
            manager,
            generation,
            owner: self.0.clone(),
        }
    }
}

impl Shared {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, (u64, ConnectionManager)> {
        self.current.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces connection `generation` after it timed out, unless another caller already
    /// did. The new one connects on first use, so Redis being down does not fail this.
    fn replace(&self, generation: u64) {
        let mut current = self.current.write().unwrap_or_else(|p| p.into_inner());
        if current.0 != generation {
            return;
        }
        let fresh =
            ConnectionManager::new_lazy_with_config(self.client.clone(), self.config.clone());
        match fresh {
            Ok(manager) => *current = (generation + 1, manager),
            Err(e) => tracing::warn!(error = %e, "cannot replace a timed-out Redis connection"),
        }
    }
}

/// One use of the ordinary connection. A response timeout seen through it replaces the
/// connection for every later use.
pub(crate) struct Conn {
    manager: ConnectionManager,
    generation: u64,
    owner: Arc<Shared>,
}

impl Conn {
    fn check<T>(&self, result: redis::RedisResult<T>) -> redis::RedisResult<T> {
        if let Err(e) = &result {
            if e.is_timeout() {
                self.owner.replace(self.generation);
            }
        }
        result
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        Box::pin(async move {
            let result = self.manager.req_packed_command(cmd).await;
            self.check(result)
        })
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        Box::pin(async move {
            let result = self
                .manager
                .req_packed_commands(pipeline, offset, count)
                .await;
            self.check(result)
        })
    }

    fn get_db(&self) -> i64 {
        self.manager.get_db()
    }
}

fn base_config(config: &Config) -> ConnectionManagerConfig {
    ConnectionManagerConfig::new()
        .set_connection_timeout(Some(config.connection_timeout))
        // Reconnects are retried by the caller (the worker backs off and carries on); a short
        // in-place retry keeps a dead Redis from stalling each request for long.
        .set_number_of_retries(2)
        .set_max_delay(Duration::from_secs(1))
}
