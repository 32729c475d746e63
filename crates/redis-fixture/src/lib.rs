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
//! Every failure panics with a descriptive message (including the server
//! log): a missing `redis-server` must fail the test run, not skip it.

mod proxy;
mod resp;
mod server;

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

pub use proxy::Proxy;
pub use resp::Reply;
pub use server::{RedisServer, ServerConfig};

/// Locates the `redis-server` binary: `$REDIS_SERVER_BIN` if set, else
/// `redis-server` on `PATH`, else `/usr/bin/redis-server`. Panics if none
/// exists.
pub fn redis_server_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("REDIS_SERVER_BIN") {
        let bin = PathBuf::from(bin);
        assert!(
            bin.is_file(),
            "REDIS_SERVER_BIN={} does not exist",
            bin.display()
        );
        return bin;
    }
    let on_path = std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join("redis-server"))
            .find(|p| p.is_file())
    });
    on_path
        .or_else(|| Some(Path::new("/usr/bin/redis-server").to_path_buf()).filter(|p| p.is_file()))
        .expect(
            "redis-server not found: install Debian's redis-server package \
             (apt-get install redis-server)",
        )
}

/// Returns a port that was free a moment ago on 127.0.0.1. Another process
/// may take it before it is used; [`RedisServer::start`] retries for that.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
        .port()
}
