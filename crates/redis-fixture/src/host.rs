//! What the fixture needs of this machine: the Redis binaries, and a free loopback port.

use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};

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
/// may take it before it is used; [`RedisServer::start`](crate::RedisServer::start) retries for that.
pub fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("cannot bind an ephemeral port on 127.0.0.1")
        .port()
}
