//! Which server delayq is connected to (Redis or Valkey, and its version), read when a
//! client connects, and the oldest one delayq runs on.
//!
//! The server is read with `HELLO` (no arguments: nothing about the connection changes),
//! which every user may run, the least-privilege ACL of the docs included (`-@dangerous`
//! takes `INFO` away). A server without it (older than Redis 6.2) is read with `INFO
//! server` to name it in the refusal.
//!
//! **The minimum is Redis 7.0.** Every script starts with `#!lua flags=...` (script flags,
//! Redis 7.0: an older server cannot even compile them), consumers wait on sharded pub/sub
//! (`SSUBSCRIBE`, `SPUBLISH`: 7.0) and reads use `ZMSCORE` (6.2). Every Valkey release
//! has all of it (Valkey began as a fork of Redis 7.2.4). A server older than that is
//! refused on connect ([`Error::ServerTooOld`]), before this client writes anything, rather
//! than failing each call with a Lua compiler error.
//!
//! On a Redis Cluster every master is checked (each as the cluster client addresses it on
//! connect).

use std::fmt;

use crate::store::connection::{Node, Ordinary};
use crate::values::error::{Error, Result};

/// The oldest Redis delayq runs on: 7.0.0.
pub const MINIMUM_REDIS: Version = Version {
    major: 7,
    minor: 0,
    patch: 0,
};

/// A server's `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Version {
    /// Major.
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Patch.
    pub patch: u32,
}

impl Version {
    /// Reads `7.0.15` (missing parts are 0; anything after a part's digits is ignored, as in
    /// `8.2.3-rc1`).
    fn parse(text: &str) -> Option<Version> {
        let mut parts = text.trim().split('.').map(|part| {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            digits.parse::<u32>().ok()
        });
        Some(Version {
            major: parts.next()??,
            minor: parts.next().flatten().unwrap_or(0),
            patch: parts.next().flatten().unwrap_or(0),
        })
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// Which server software it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerKind {
    /// Redis.
    Redis,
    /// Valkey.
    Valkey,
}

impl ServerKind {
    /// `"redis"` or `"valkey"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServerKind::Redis => "redis",
            ServerKind::Valkey => "valkey",
        }
    }
}

/// A server as it describes itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// Redis or Valkey.
    pub kind: ServerKind,
    /// Its own version (Valkey's, not the Redis version it reports for compatibility).
    pub version: Version,
}

impl ServerInfo {
    /// Reads the reply of `HELLO`: a map (RESP3) or a flat list of fields and values
    /// (RESP2) with `server` and `version`.
    fn from_hello(reply: &redis::Value) -> Option<ServerInfo> {
        use redis::Value;
        let text = |v: &Value| match v {
            Value::BulkString(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Value::SimpleString(s) => Some(s.clone()),
            _ => None,
        };
        let pairs: Vec<(String, String)> = match reply {
            Value::Map(pairs) => pairs
                .iter()
                .filter_map(|(k, v)| Some((text(k)?, text(v)?)))
                .collect(),
            Value::Array(flat) => flat
                .chunks(2)
                .filter_map(|kv| Some((text(kv.first()?)?, text(kv.get(1)?)?)))
                .collect(),
            _ => return None,
        };
        let field = |name: &str| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v);
        let version = Version::parse(field("version")?)?;
        let kind = match field("server")?.as_str() {
            "valkey" => ServerKind::Valkey,
            _ => ServerKind::Redis,
        };
        Some(ServerInfo { kind, version })
    }

    /// Reads the text of `INFO server`.
    pub fn parse(info: &str) -> Result<ServerInfo> {
        let field = |name: &str| {
            info.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        let redis_version = field("redis_version")
            .and_then(Version::parse)
            .ok_or_else(|| Error::Protocol("INFO server has no redis_version".into()))?;
        let valkey = field("valkey_version").and_then(Version::parse);
        let named_valkey = field("server_name") == Some("valkey");
        Ok(match valkey {
            Some(version) => ServerInfo {
                kind: ServerKind::Valkey,
                version,
            },
            // Valkey 7.2 reported only `server_name` and `redis_version`.
            None if named_valkey => ServerInfo {
                kind: ServerKind::Valkey,
                version: redis_version,
            },
            None => ServerInfo {
                kind: ServerKind::Redis,
                version: redis_version,
            },
        })
    }

    /// Whether delayq runs on it.
    pub fn is_supported(&self) -> bool {
        self.kind == ServerKind::Valkey || self.version >= MINIMUM_REDIS
    }
}

impl fmt::Display for ServerInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            ServerKind::Redis => write!(f, "Redis {}", self.version),
            ServerKind::Valkey => write!(f, "Valkey {}", self.version),
        }
    }
}

/// Reads each server behind `conn` (every master of a cluster) and refuses any that delayq
/// cannot run on; the oldest of them otherwise.
pub(crate) async fn check(conn: &Ordinary) -> Result<ServerInfo> {
    let mut oldest: Option<ServerInfo> = None;
    for node in conn.scan_targets().await? {
        let info = read(conn, &node).await?;
        if !info.is_supported() {
            return Err(too_old(info.to_string()));
        }
        if oldest.as_ref().is_none_or(|o| info.version < o.version) {
            oldest = Some(info);
        }
    }
    oldest.ok_or_else(|| Error::Protocol("no server answered HELLO".into()))
}

/// One server, by `HELLO`; by `INFO server` if it has no `HELLO` without arguments (older
/// than Redis 6.2), and refused if neither tells.
async fn read(conn: &Ordinary, node: &Node) -> Result<ServerInfo> {
    match conn
        .query_on::<redis::Value>(node, &redis::cmd("HELLO"))
        .await
    {
        Ok(reply) => ServerInfo::from_hello(&reply)
            .ok_or_else(|| Error::Protocol(format!("HELLO answered {reply:?}"))),
        Err(Error::Redis(e))
            if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::ResponseError) =>
        {
            match conn
                .query_on::<String>(node, redis::cmd("INFO").arg("server"))
                .await
            {
                Ok(text) => ServerInfo::parse(&text),
                Err(_) => Err(too_old(
                    "a server without HELLO (older than Redis 6.2)".into(),
                )),
            }
        }
        Err(e) => Err(e),
    }
}

fn too_old(found: String) -> Error {
    Error::ServerTooOld {
        found,
        needed: format!("Redis {MINIMUM_REDIS} or later, or Valkey"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_server_is_read_from_its_own_fields() {
        let redis =
            ServerInfo::parse("# Server\r\nredis_version:7.0.15\r\nredis_mode:standalone\r\n")
                .expect("redis");
        assert_eq!(redis.to_string(), "Redis 7.0.15");
        assert!(redis.is_supported());
        let valkey = ServerInfo::parse(
            "redis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\n",
        )
        .expect("valkey");
        assert_eq!(valkey.to_string(), "Valkey 9.1.2");
        let old = ServerInfo::parse("redis_version:6.2.14\r\n").expect("old");
        assert!(!old.is_supported());
        assert_eq!(old.to_string(), "Redis 6.2.14");
        assert!(ServerInfo::parse("redis_version:8.2.3\r\n")
            .expect("8")
            .is_supported());
        assert!(ServerInfo::parse("# Server\r\n").is_err());
    }

    #[test]
    fn hello_is_read_in_either_protocol() {
        use redis::Value;
        let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        let resp2 = Value::Array(vec![
            bulk("server"),
            bulk("valkey"),
            bulk("version"),
            bulk("9.1.2"),
            bulk("proto"),
            Value::Int(2),
        ]);
        let valkey = ServerInfo::from_hello(&resp2).expect("resp2");
        assert_eq!(valkey.to_string(), "Valkey 9.1.2");
        let resp3 = Value::Map(vec![
            (bulk("server"), bulk("redis")),
            (bulk("version"), bulk("6.2.14")),
        ]);
        let old = ServerInfo::from_hello(&resp3).expect("resp3");
        assert_eq!(old.to_string(), "Redis 6.2.14");
        assert!(!old.is_supported());
    }
}
