//! Test fixture for the Redis-based queue: starts real `redis-server`
//! processes (never mocks, never the shared instance on port 6379) on free
//! loopback ports, each in its own temporary directory, for tests, examples
//! and benchmarks.
//!
//! ```no_run
//! use redis_fixture::{RedisServer, ServerConfig};
//!
//! let mut server = RedisServer::start_with(ServerConfig::appendonly());
//! server.cli(&["SET", "k", "v"]);
//! server.kill(); // simulate a crash
//! server.restart(); // same port, same data directory
//! assert_eq!(server.cli(&["GET", "k"]), "v");
//! ```
//!
//! [`RedisCluster`] starts a real multi-node Redis Cluster (masters and
//! replicas, each its own `redis-server`) for redirects and failovers.
//! [`RedisSentinel`] starts a master, a replica and three sentinels that
//! fail the master over when it dies.
//!
//! The server binary is `redis-server`, or `valkey-server` where only Valkey is installed,
//! or the one `DELAYQ_REDIS_SERVER` names (`redis-binaries`), so that the whole suite runs
//! on another server unchanged.
//!
//! Every failure panics with a descriptive message (including the server
//! log): a missing server binary must fail the test run, not skip it.

mod cluster;
mod host;
mod monitor;
mod proxy;
mod resp;
mod sentinel;
mod server;
mod tested_servers;

pub use cluster::{key_slot, RedisCluster};
pub use host::{free_port, redis_cli_binary, redis_server_binary};
pub use monitor::Monitor;
pub use proxy::Proxy;
pub use resp::Reply;
pub use sentinel::RedisSentinel;
pub use server::{RedisServer, ServerConfig};
pub use tested_servers::{cannot_run, tested_server};
