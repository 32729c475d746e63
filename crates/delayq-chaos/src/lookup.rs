//! What the checker asks Redis at the end of a chaos run, through the library: whether a
//! message is still there, every event the queue recorded, every dead letter.

use std::time::Duration;

use crate::evidence::DeadOne;
use crate::plan;

/// Asks Redis, through the library, whether a message is still there.
pub(crate) struct Lookup {
    runtime: tokio::runtime::Runtime,
    queue: delayq::Queue,
}

impl Lookup {
    /// Through the Redis at `urls[0]`, or with `cluster` the cluster of `urls`.
    pub(crate) fn new(urls: &[String], cluster: bool) -> Result<Lookup, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?;
        let nodes: Vec<&str> = urls.iter().map(String::as_str).collect();
        // With the run's keys, if it has them: a dead letter's payload opened (sealing.rs).
        let config = crate::sealing::config(delayq::Config::default())?;
        let dq = runtime
            .block_on(async {
                match cluster {
                    true => delayq::DelayQ::connect_cluster(&nodes, config).await,
                    false => delayq::DelayQ::connect_with(nodes[0], config).await,
                }
            })
            .map_err(|e| e.to_string())?;
        let queue = dq.queue(plan::QUEUE).map_err(|e| e.to_string())?;
        Ok(Lookup { runtime, queue })
    }

    /// True when the message is there, or when Redis cannot say (never call a message lost
    /// on a failed lookup).
    pub(crate) fn exists(&self, id: &str) -> bool {
        !matches!(self.runtime.block_on(self.queue.get(id)), Ok(None))
    }

    /// Every event the queue recorded, oldest first.
    pub(crate) fn events(&self) -> Result<Vec<crate::evidence::Recorded>, String> {
        self.runtime.block_on(async {
            let mut reader = self
                .queue
                .events(delayq::EventStart::Oldest, delayq::EventFilter::new())
                .await
                .map_err(|e| format!("reading the events: {e}"))?;
            let mut all = Vec::new();
            loop {
                let got = reader
                    .next(delayq::MAX_EVENTS_READ, Some(Duration::ZERO))
                    .await
                    .map_err(|e| format!("reading the events: {e}"))?;
                if got.is_empty() {
                    return Ok(all);
                }
                all.extend(got.into_iter().map(|e| crate::evidence::Recorded {
                    dropped: e.detail.as_deref() == Some("dropped"),
                    kind: e.kind.as_str().to_owned(),
                    id: e.id,
                }));
            }
        })
    }

    /// Every dead letter, with its payload and last error.
    pub(crate) fn dead_letters(&self) -> Result<Vec<DeadOne>, String> {
        let mut all = Vec::new();
        loop {
            let page = self
                .runtime
                .block_on(self.queue.dead_letters().list(all.len() as u64, 1000))
                .map_err(|e| format!("reading the dead letters: {e}"))?;
            let full = page.len() == 1000;
            all.extend(page.into_iter().map(|d| DeadOne {
                payload: crate::history::Payload::parse(&d.payload),
                id: d.id,
                died_ms: d.died_at_ms,
                last_error: d.last_error,
            }));
            if !full {
                return Ok(all);
            }
        }
    }
}
