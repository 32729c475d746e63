//! What the fixture needs of this machine: the server binaries, and a free loopback port.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;

/// The server binary every fixture server runs: `$DELAYQ_REDIS_SERVER` if set, else
/// `redis-server`, else `valkey-server` on `PATH` (`redis-binaries`). Panics, saying how
/// to install one, if there is none.
pub fn redis_server_binary() -> PathBuf {
    redis_binaries::find_server(None).unwrap_or_else(|e| panic!("{e}"))
}

/// The command-line client that builds test clusters: `$DELAYQ_REDIS_CLI` if set, else the
/// one beside the server binary, else `redis-cli` or `valkey-cli` on `PATH`. Panics if
/// there is none.
pub fn redis_cli_binary() -> PathBuf {
    redis_binaries::find_cli(None).unwrap_or_else(|e| panic!("{e}"))
}

/// Returns a port that was free a moment ago on 127.0.0.1. Another process
/// may take it before it is used; [`RedisServer::start`](crate::RedisServer::start) retries for that.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
        .port()
}
