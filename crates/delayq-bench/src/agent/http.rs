//! The agents' way to the queue through `delayq serve`'s HTTP API instead of the library:
//! the same operations, over keep-alive connections. Payloads travel as JSON strings. With
//! `--via push`, also the call that points the queue's push target at the consumer.

use std::time::Duration;

use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::error::Result;
use crate::workload::QUEUE_NAME;

/// The bench queue, over HTTP.
#[derive(Clone)]
pub(crate) struct HttpQueue {
    client: reqwest::Client,
    base: String,
}

/// One delivery: its receipt and payload bytes.
pub(crate) struct HttpDelivery {
    pub(crate) receipt: String,
    pub(crate) payload: Vec<u8>,
}

impl HttpQueue {
    pub(crate) fn new(port: u16) -> Result<Self> {
        // Without a provider, a reqwest unified with delayq-server's features panics when the
        // client is built (see Cargo.toml). Already installed is fine too.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(64)
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        Ok(HttpQueue {
            client,
            base: format!("http://127.0.0.1:{port}/v1/queues/{QUEUE_NAME}"),
        })
    }

    async fn post<T: DeserializeOwned>(&self, path: &str, body: &impl Serialize) -> Result<T> {
        self.call(reqwest::Method::POST, path, body).await
    }

    /// One call; its answer read as `T` (`IgnoredAny` where nothing in it is needed; an
    /// empty answer reads as JSON `null`).
    async fn call<T: DeserializeOwned>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &impl Serialize,
    ) -> Result<T> {
        let what = format!("{method} {path}");
        let resp = self
            .client
            .request(method, format!("{}{path}", self.base))
            .json(body)
            .send()
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(|e| format!("{what}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{what}: {status} {}", String::from_utf8_lossy(&bytes)).into());
        }
        let json: &[u8] = if bytes.is_empty() { b"null" } else { &bytes };
        Ok(serde_json::from_slice(json).map_err(|e| format!("{what}: {e}"))?)
    }

    /// Sets the queue's push target (`PUT /v1/queues/{q}/push`); the server's answer.
    pub(crate) async fn set_push_target(&self, url: &str, concurrency: usize) -> Result<Value> {
        let body = json!({ "url": url, "concurrency": concurrency, "timeout": "10s" });
        self.call(reqwest::Method::PUT, "/push", &body).await
    }

    /// One batch call; the number of messages acknowledged.
    pub(crate) async fn send_batch(&self, batch: &[(Vec<u8>, Option<u64>)]) -> Result<usize> {
        let messages = batch
            .iter()
            .map(|(p, d)| OutMessage::new(p, *d))
            .collect::<Result<Vec<_>>>()?;
        let sent: SentBatch = self.post("/batch", &OutBatch { messages }).await?;
        Ok(sent.results.len())
    }

    pub(crate) async fn send(&self, payload: &[u8], delay_ms: Option<u64>) -> Result<()> {
        let _: IgnoredAny = self
            .post("/messages", &OutMessage::new(payload, delay_ms)?)
            .await?;
        Ok(())
    }

    /// A long-poll for up to `max` deliveries, first acking `acks` (receipts).
    pub(crate) async fn receive(
        &self,
        max: usize,
        wait: Duration,
        acks: Vec<String>,
    ) -> Result<Vec<HttpDelivery>> {
        let mut body = json!({ "max": max, "lease": "30s", "wait": wait.as_millis() as u64 });
        if !acks.is_empty() {
            body["acks"] = json!(acks);
        }
        let got: Received = self.post("/receive", &body).await?;
        Ok(got
            .deliveries
            .into_iter()
            .map(|d| HttpDelivery {
                receipt: d.receipt,
                payload: d.payload.into_bytes(),
            })
            .collect())
    }

    pub(crate) async fn ack(&self, receipts: Vec<String>) -> Result<()> {
        let _: IgnoredAny = self.post("/ack", &json!({ "receipts": receipts })).await?;
        Ok(())
    }

    /// Delayed + ready, from the queue's stats.
    pub(crate) async fn pending(&self) -> Result<u64> {
        let resp = self
            .client
            .get(&self.base)
            .send()
            .await
            .map_err(|e| format!("GET stats: {e}"))?;
        let stats: Value = resp.json().await.map_err(|e| format!("GET stats: {e}"))?;
        Ok(stats["delayed"].as_u64().unwrap_or(0) + stats["ready"].as_u64().unwrap_or(0))
    }
}

// The bodies as typed structs rather than `Value` trees, as a client of the API in any
// language would write them: a map per message, its allocations and reading every answer
// whole are the benchmark client's cost, not the server's (BENCHMARKS.md, issue 30).

/// A message of a send or batch: the payload as a JSON string.
#[derive(Serialize)]
struct OutMessage<'a> {
    payload: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay: Option<u64>,
}

impl<'a> OutMessage<'a> {
    fn new(payload: &'a [u8], delay: Option<u64>) -> Result<Self> {
        let payload = std::str::from_utf8(payload).map_err(|e| format!("payload: {e}"))?;
        Ok(OutMessage { payload, delay })
    }
}

#[derive(Serialize)]
struct OutBatch<'a> {
    messages: Vec<OutMessage<'a>>,
}

/// A batch's answer: one result per message, counted.
#[derive(Deserialize)]
struct SentBatch {
    results: Vec<IgnoredAny>,
}

/// A receive's answer: each delivery's receipt and payload (a JSON string: the agents send
/// nothing else); its other fields are skipped.
#[derive(Deserialize)]
struct Received {
    deliveries: Vec<InDelivery>,
}

#[derive(Deserialize)]
struct InDelivery {
    receipt: String,
    payload: String,
}
