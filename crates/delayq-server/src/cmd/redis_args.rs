//! Where Redis is, as every command is told: a URL, a cluster, Sentinels, or the embedded
//! Redis of a data directory.

use std::path::PathBuf;

/// Where Redis is, for every command.
#[derive(clap::Args, Clone)]
pub struct RedisArgs {
    /// Use this Redis (redis://, rediss:// for TLS, redis+unix://; user:password@ for ACLs;
    /// /N for a database). Without it: the embedded Redis of --data-dir.
    // Env values hidden from --help: a URL's user:password@ is a secret.
    #[arg(long, env = "DELAYQ_REDIS_URL", global = true, hide_env_values = true)]
    pub(super) redis_url: Option<String>,
    /// Use this Redis Cluster: URLs of some of its nodes, comma-separated (the rest are
    /// found from them). Commands follow MOVED and ASK through resharding and failover.
    #[arg(
        long,
        env = "DELAYQ_REDIS_CLUSTER",
        global = true,
        hide_env_values = true,
        value_delimiter = ',',
        conflicts_with = "redis_url"
    )]
    redis_cluster: Vec<String>,
    /// Use the Redis master that these Sentinels (URLs, comma-separated) monitor under
    /// --sentinel-master, following it through failovers.
    #[arg(
        long,
        env = "DELAYQ_REDIS_SENTINEL",
        global = true,
        hide_env_values = true,
        value_delimiter = ',',
        conflicts_with_all = ["redis_url", "redis_cluster"],
        requires = "sentinel_master"
    )]
    redis_sentinel: Vec<String>,
    /// The name the Sentinels monitor the master by.
    #[arg(long, env = "DELAYQ_SENTINEL_MASTER", global = true)]
    sentinel_master: Option<String>,
    /// Data directory of the embedded Redis.
    #[arg(
        long,
        env = "DELAYQ_DATA_DIR",
        default_value = "delayq-data",
        global = true
    )]
    pub(super) data_dir: PathBuf,
}

impl RedisArgs {
    /// Connects to the cluster of --redis-cluster or the master of --redis-sentinel, if
    /// one was given.
    pub(super) async fn connect_cluster(
        &self,
        config: delayq::Config,
    ) -> Option<anyhow::Result<delayq::DelayQ>> {
        if !self.redis_sentinel.is_empty() {
            let sentinels: Vec<&str> = self.redis_sentinel.iter().map(String::as_str).collect();
            let master = self.sentinel_master.as_deref().unwrap_or_default();
            return Some(
                delayq::DelayQ::connect_sentinel(&sentinels, master, config)
                    .await
                    .map_err(|e| anyhow::anyhow!("cannot reach the master through Sentinel: {e}")),
            );
        }
        if self.redis_cluster.is_empty() {
            return None;
        }
        let nodes: Vec<&str> = self.redis_cluster.iter().map(String::as_str).collect();
        Some(
            delayq::DelayQ::connect_cluster(&nodes, config)
                .await
                .map_err(|e| anyhow::anyhow!("cannot connect to the Redis Cluster: {e}")),
        )
    }

    /// True when Redis is given (a URL, a cluster or Sentinels), so nothing is embedded.
    pub(super) fn is_external(&self) -> bool {
        self.redis_url.is_some()
            || !self.redis_cluster.is_empty()
            || !self.redis_sentinel.is_empty()
    }
}
