//! The agents' way to the queue through `delayq serve`'s HTTP API instead of the library:
//! the same operations, over keep-alive connections. Payloads travel as JSON strings. With
//! `--via push`, also the call that points the queue's push target at the consumer.

use std::time::Duration;

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

    async fn post(&self, path: &str, body: &Value) -> Result<Value> {
        self.call(reqwest::Method::POST, path, body).await
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: &Value) -> Result<Value> {
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
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        Ok(serde_json::from_slice(&bytes).map_err(|e| format!("{what}: {e}"))?)
    }

    /// Sets the queue's push target (`PUT /v1/queues/{q}/push`); the server's answer.
    pub(crate) async fn set_push_target(&self, url: &str, concurrency: usize) -> Result<Value> {
        let body = json!({ "url": url, "concurrency": concurrency, "timeout": "10s" });
        self.call(reqwest::Method::PUT, "/push", &body).await
    }

    fn message(payload: &[u8], delay_ms: Option<u64>) -> Value {
        let text = String::from_utf8_lossy(payload);
        match delay_ms {
            Some(ms) => json!({ "payload": text, "delay": ms }),
            None => json!({ "payload": text }),
        }
    }

    /// One batch call; the number of messages acknowledged.
    pub(crate) async fn send_batch(&self, batch: &[(Vec<u8>, Option<u64>)]) -> Result<usize> {
        let messages: Vec<Value> = batch.iter().map(|(p, d)| Self::message(p, *d)).collect();
        let sent = self
            .post("/batch", &json!({ "messages": messages }))
            .await?;
        Ok(sent["results"].as_array().map_or(0, Vec::len))
    }

    pub(crate) async fn send(&self, payload: &[u8], delay_ms: Option<u64>) -> Result<()> {
        self.post("/messages", &Self::message(payload, delay_ms))
            .await?;
        Ok(())
    }

    /// A long-poll for up to `max` deliveries.
    pub(crate) async fn receive(&self, max: usize, wait: Duration) -> Result<Vec<HttpDelivery>> {
        let body = json!({ "max": max, "lease": "30s", "wait": wait.as_millis() as u64 });
        let got = self.post("/receive", &body).await?;
        let mut out = Vec::new();
        for d in got["deliveries"].as_array().into_iter().flatten() {
            let receipt = d["receipt"]
                .as_str()
                .ok_or("a delivery without a receipt")?;
            let payload = d["payload"]
                .as_str()
                .ok_or("a payload that is not a string")?;
            out.push(HttpDelivery {
                receipt: receipt.to_owned(),
                payload: payload.as_bytes().to_vec(),
            });
        }
        Ok(out)
    }

    pub(crate) async fn ack(&self, receipts: Vec<String>) -> Result<()> {
        self.post("/ack", &json!({ "receipts": receipts })).await?;
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
