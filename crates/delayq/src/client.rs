//! The entry point: a connected client from which queue handles are made.

use std::sync::Arc;

use crate::connection;
use crate::error::Result;
use crate::keys::Keys;
use crate::names::QueueName;
use crate::options::Config;
use crate::queue::Queue;
use crate::wakeup::Subscriptions;

/// A connection to one Redis server, or to a Redis Cluster, shared by all queue handles made
/// from it. Cheap to clone.
#[derive(Clone)]
pub struct DelayQ {
    target: Target,
    conn: connection::Ordinary,
    config: Arc<Config>,
    /// Wake-up subscriptions, one per queue, shared by every consumer made from this client.
    subscriptions: Arc<Subscriptions>,
}

impl DelayQ {
    /// Connects with the default [`Config`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, Config::default()).await
    }

    /// Connects with `config`.
    pub async fn connect_with(url: &str, config: Config) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = connection::Ordinary::connect(&client, &config).await?;
        Ok(DelayQ {
            target: Target::Single(Box::new(client)),
            conn,
            config: Arc::new(config),
            subscriptions: Arc::default(),
        })
    }

    /// Connects to a Redis Cluster through `nodes` (URLs of any of its nodes; the rest are
    /// found from them). Commands follow `MOVED` and `ASK`, so a queue works whichever node
    /// owns its slot, through resharding and failover. Fails if no node answers now.
    pub async fn connect_cluster(nodes: &[&str], config: Config) -> Result<Self> {
        let client = connection::cluster_client(nodes, &config, None::<NoPushes>)?;
        let conn = connection::Ordinary::connect_cluster(&client).await?;
        Ok(DelayQ {
            target: Target::Cluster(nodes.iter().map(|n| n.to_string()).collect()),
            conn,
            config: Arc::new(config),
            subscriptions: Arc::default(),
        })
    }

    /// A handle on queue `name` (validated: see [`QueueName`]).
    pub fn queue(&self, name: &str) -> Result<Queue> {
        let name = QueueName::new(name)?;
        Ok(Queue::new(
            Arc::new(Keys::new(&name)),
            name,
            self.target.clone(),
            self.conn.clone(),
            self.config.clone(),
            self.subscriptions.clone(),
        ))
    }

    /// The queues that exist in this Redis (every queue that was ever sent to and still has
    /// keys), by name. Walks the keyspace with `SCAN`, so it costs time in proportion to the
    /// number of keys: meant for admin tools, not hot paths.
    pub async fn queues(&self) -> Result<Vec<QueueName>> {
        let mut conn = self.conn.get();
        let mut names = std::collections::BTreeSet::new();
        let mut cursor = 0u64;
        loop {
            let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(Keys::seq_pattern())
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await?;
            names.extend(keys.iter().filter_map(|k| Keys::queue_of_seq(k)));
            if next == 0 {
                break;
            }
            cursor = next;
        }
        Ok(names.into_iter().collect())
    }
}

/// Where Redis is: what subscriptions connect to.
#[derive(Clone)]
pub(crate) enum Target {
    Single(Box<redis::Client>),
    /// The node URLs given to [`DelayQ::connect_cluster`].
    Cluster(Vec<String>),
}

/// The ordinary cluster connection takes no pushes.
type NoPushes = tokio::sync::mpsc::UnboundedSender<redis::PushInfo>;
