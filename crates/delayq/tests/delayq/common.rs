//! Shared test helpers: a server per test, a connected client, and waiting on conditions.

#![allow(dead_code)] // each test module uses its own subset

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{Config, DelayQ, Queue};
pub use redis_fixture::{RedisServer, ServerConfig};

/// A fresh server and a client connected to it.
pub async fn setup() -> (RedisServer, DelayQ) {
    setup_with(ServerConfig::default()).await
}

pub async fn setup_with(config: ServerConfig) -> (RedisServer, DelayQ) {
    let server = RedisServer::start_with(config);
    let dq = DelayQ::connect_with(&server.url(), Config::default())
        .await
        .expect("connect to the test server");
    (server, dq)
}

pub fn queue(dq: &DelayQ, name: &str) -> Queue {
    dq.queue(name).expect("valid queue name")
}

/// This host's clock in ms (the test server runs on the same host).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
}

/// Polls `check` until it returns true, failing the test after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
