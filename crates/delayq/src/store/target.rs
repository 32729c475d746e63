//! Where Redis is (one server, a cluster, the master that sentinels name), and how to open
//! a connection of one's own to it: what wake-up subscriptions and sends that wait for
//! replicas use, beside the client's shared connection.

use std::sync::Arc;

use crate::store::connection;
use crate::store::sentinel::Sentinels;
use crate::values::config::Config;
use crate::values::error::Result;

/// Where Redis is.
#[derive(Clone)]
pub(crate) enum Target {
    Single(Box<redis::Client>),
    /// The node URLs given to [`DelayQ::connect_cluster`](crate::DelayQ::connect_cluster).
    Cluster(Vec<String>),
    /// The master the sentinels name, asked again on each connect.
    Sentinel(Arc<Sentinels>),
}

impl Target {
    /// A new ordinary connection of its own to this target.
    pub(crate) async fn connect(&self, config: &Config) -> Result<connection::Ordinary> {
        match self {
            Target::Single(client) => connection::Ordinary::connect(client, config).await,
            Target::Cluster(nodes) => {
                let nodes: Vec<&str> = nodes.iter().map(String::as_str).collect();
                let client = connection::cluster_client(&nodes, config, None::<NoPushes>)?;
                connection::Ordinary::connect_cluster(&client).await
            }
            Target::Sentinel(sentinels) => {
                connection::Ordinary::connect_sentinel(sentinels.clone(), config).await
            }
        }
    }
}

/// The ordinary cluster connection takes no pushes.
pub(crate) type NoPushes = tokio::sync::mpsc::UnboundedSender<redis::PushInfo>;
