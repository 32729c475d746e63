//! The entry point: a connected client from which queue handles are made.

use std::sync::Arc;

use redis::aio::ConnectionManager;

use crate::connection;
use crate::error::Result;
use crate::keys::Keys;
use crate::names::QueueName;
use crate::options::Config;
use crate::queue::Queue;

/// A connection to one Redis server, shared by all queue handles made from it. Cheap to clone.
#[derive(Clone)]
pub struct DelayQ {
    client: redis::Client,
    conn: ConnectionManager,
    config: Arc<Config>,
}

impl DelayQ {
    /// Connects with the default [`Config`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, Config::default()).await
    }

    /// Connects with `config`.
    pub async fn connect_with(url: &str, config: Config) -> Result<Self> {
        let client = redis::Client::open(url)?;
        let conn = connection::ordinary(&client, &config).await?;
        Ok(DelayQ {
            client,
            conn,
            config: Arc::new(config),
        })
    }

    /// A handle on queue `name` (validated: see [`QueueName`]).
    pub fn queue(&self, name: &str) -> Result<Queue> {
        let name = QueueName::new(name)?;
        Ok(Queue::new(
            Arc::new(Keys::new(&name)),
            name,
            self.client.clone(),
            self.conn.clone(),
            self.config.clone(),
        ))
    }
}
