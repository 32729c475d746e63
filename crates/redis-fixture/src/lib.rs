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
//! Every failure panics with a descriptive message (including the server
//! log): a missing `redis-server` must fail the test run, not skip it.

mod cluster;
mod host;
mod proxy;
mod resp;
mod sentinel;
mod server;

pub use cluster::{key_slot, RedisCluster};
pub use host::{free_port, redis_cli_binary, redis_server_binary};
pub use proxy::Proxy;
pub use resp::Reply;
pub use sentinel::RedisSentinel;
pub use server::{RedisServer, ServerConfig};
