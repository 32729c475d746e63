//! Redis Sentinel: which server is the master of a monitored group right now.
//!
//! With [`DelayQ::connect_sentinel`](crate::DelayQ::connect_sentinel) delayq knows no fixed
//! address. It asks the sentinels for the master when it connects, and again whenever the
//! server it uses may have stopped being the master: the connection is refused or drops,
//! commands time out, or the server answers `READONLY` (it came back as a replica) or
//! `LOADING`. The ordinary connection (`connection.rs`) then moves to the master named, and a
//! lost wake-up hub (`wakeup.rs`) is reopened through the sentinels.
//!
//! The lookup is redis-rs's `Sentinel`, which follows the Sentinel client protocol: each
//! sentinel in turn is asked for the master (one that flags it down is passed over), and the
//! server named must say it is a master (`ROLE`) before it is used. A sentinel that does not
//! answer is skipped, so the lookup works while a majority of them, or any one that knows
//! the current master, is up.

use std::time::Duration;

use redis::sentinel::{Sentinel, SentinelNodeConnectionInfo};
use redis::{ConnectionAddr, IntoConnectionInfo, TlsMode};
use tokio::sync::Mutex;

use crate::values::config::Config;
use crate::values::error::Result;

/// The sentinels of one monitored master, and how to reach the master they name.
pub(crate) struct Sentinels {
    /// Caches a connection per sentinel; lookups take turns (it needs `&mut`).
    sentinel: Mutex<Sentinel>,
    master_name: String,
    /// Credentials, database and TLS for the master: those of the first sentinel URL.
    node: SentinelNodeConnectionInfo,
    /// A bound on a whole lookup: redis-rs bounds each step, not the walk over every
    /// sentinel.
    timeout: Duration,
}

impl Sentinels {
    /// The sentinels at `urls` (none is contacted yet) for the master named `master_name`.
    pub(crate) fn new(urls: &[&str], master_name: &str, config: &Config) -> Result<Sentinels> {
        let first = urls
            .first()
            .ok_or_else(|| {
                redis::RedisError::from((
                    redis::ErrorKind::EmptySentinelList,
                    "at least one sentinel is required",
                ))
            })?
            .into_connection_info()?;
        // A sentinel has no databases: the database in its URL is meant for the master.
        let sentinel_urls = urls
            .iter()
            .map(|url| {
                let info = url.into_connection_info()?;
                let settings = info.redis_settings().clone().set_db(0);
                Ok(info.set_redis_settings(settings))
            })
            .collect::<redis::RedisResult<Vec<_>>>()?;
        let mut node = SentinelNodeConnectionInfo::default()
            .set_redis_connection_info(first.redis_settings().clone())
            .set_tcp_settings(first.tcp_settings().clone());
        if let ConnectionAddr::TcpTls { insecure, .. } = first.addr() {
            node = node.set_tls_mode(if *insecure {
                TlsMode::Insecure
            } else {
                TlsMode::Secure
            });
        }
        Ok(Sentinels {
            sentinel: Mutex::new(Sentinel::build(sentinel_urls)?),
            master_name: master_name.to_owned(),
            node,
            timeout: 2 * config.connection_timeout + config.response_timeout,
        })
    }

    /// A client for the current master, checked to be one. Fails (retryably) while no
    /// sentinel names a master that answers as one, as during a failover.
    pub(crate) async fn master(&self) -> Result<redis::Client> {
        let lookup = async {
            let mut sentinel = self.sentinel.lock().await;
            sentinel
                .async_master_for(&self.master_name, Some(&self.node))
                .await
        };
        match tokio::time::timeout(self.timeout, lookup).await {
            Ok(client) => Ok(client?),
            Err(_) => Err(redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "no sentinel named a master for {:?} within {:?}",
                    self.master_name, self.timeout
                ),
            ))
            .into()),
        }
    }
}

/// Whether `e`, met on the master's connection, may mean that the master has moved: the
/// server is gone or silent, or it is not (or not yet) serving as master.
pub(crate) fn master_may_have_moved(e: &redis::RedisError) -> bool {
    use redis::{ErrorKind, ServerErrorKind};
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || e.is_timeout()
        || e.is_unrecoverable_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::ReadOnly
                    | ServerErrorKind::BusyLoading
                    | ServerErrorKind::MasterDown
            )
        )
}
