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
mod proxy;
mod resp;
mod sentinel;
mod server;

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

pub use cluster::{key_slot, RedisCluster};
pub use proxy::Proxy;
pub use resp::Reply;
pub use sentinel::RedisSentinel;
pub use server::{RedisServer, ServerConfig};

/// Locates the `redis-server` binary: `$REDIS_SERVER_BIN` if set, else
/// `redis-server` on `PATH`, else `/usr/bin/redis-server`. Panics if none
/// exists.
pub fn redis_server_binary() -> PathBuf {
    find_binary("REDIS_SERVER_BIN", "redis-server", None).expect(
        "redis-server not found: install Debian's redis-server package \
         (apt-get install redis-server)",
    )
}

/// Locates the `redis-cli` binary: `$REDIS_CLI_BIN` if set, else the
/// `redis-cli` next to `$REDIS_SERVER_BIN` (a custom build comes with its
/// own), else `redis-cli` on `PATH`, else `/usr/bin/redis-cli`. Panics if
/// none exists.
pub fn redis_cli_binary() -> PathBuf {
    let beside_server = std::env::var_os("REDIS_SERVER_BIN")
        .and_then(|bin| Some(Path::new(&bin).parent()?.join("redis-cli")));
    find_binary("REDIS_CLI_BIN", "redis-cli", beside_server).expect(
        "redis-cli not found: install Debian's redis-tools package \
         (apt-get install redis-tools, which redis-server depends on)",
    )
}

/// `$env_var` if set (panics if it names no file), else `preferred` if it
/// exists, else `name` on `PATH`, else `/usr/bin/{name}`.
fn find_binary(env_var: &str, name: &str, preferred: Option<PathBuf>) -> Option<PathBuf> {
    if let Some(bin) = std::env::var_os(env_var) {
        let bin = PathBuf::from(bin);
        assert!(bin.is_file(), "{env_var}={} does not exist", bin.display());
        return Some(bin);
    }
    let on_path = || {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join(name))
                .find(|p| p.is_file())
        })
    };
    preferred
        .filter(|p| p.is_file())
        .or_else(on_path)
        .or_else(|| Some(Path::new("/usr/bin").join(name)).filter(|p| p.is_file()))
}

/// Returns a port that was free a moment ago on 127.0.0.1. Another process
/// may take it before it is used; [`RedisServer::start`] retries for that.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
        .port()
}
