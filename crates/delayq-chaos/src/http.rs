//! A small client of delayq's HTTP API, as a non-Rust service would use it: JSON over
//! pooled connections, and a clear line between failures worth retrying (the server or
//! Redis unreachable: connection errors, timeouts, 503) and answers that are final.

use std::time::Duration;

use serde_json::Value;

use crate::plan::QUEUE;

/// An API call that did not succeed.
#[derive(Debug)]
pub struct CallError {
    /// The server (or Redis behind it) was unreachable: try again.
    pub retryable: bool,
    /// The status, when the server answered.
    pub status: Option<u16>,
    /// What happened.
    pub message: String,
}

/// The queue's endpoints on one server.
#[derive(Clone)]
pub struct HttpQueue {
    client: reqwest::Client,
    base: String,
}

impl CallError {
    /// The server failed the call (500) because its Redis Cluster redirected it mid-failover:
    /// a delayq bug (it should be a 503), retried by this harness and counted.
    pub fn redirected(&self) -> bool {
        self.status == Some(500) && crate::history::is_redirect(&self.message)
    }
}

impl HttpQueue {
    /// Talks to the server at `base` (`http://127.0.0.1:PORT`).
    pub fn new(base: &str) -> Result<HttpQueue, String> {
        // Built with delayq-server, reqwest has its rustls without a crypto provider: every
        // client, plain http:// too, needs one installed (ring, as the server installs).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(2))
            // Longer than any long-poll this harness asks for.
            .timeout(Duration::from_secs(15))
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        Ok(HttpQueue {
            client,
            base: format!("{}/v1/queues/{QUEUE}", base.trim_end_matches('/')),
        })
    }

    /// POSTs `body` to the queue's `path`; the answer's JSON (`null` for an empty body).
    pub async fn post(&self, path: &str, body: &Value) -> Result<Value, CallError> {
        let sent = self
            .client
            .post(format!("{}{path}", self.base))
            .json(body)
            .send()
            .await;
        let resp = sent.map_err(|e| CallError {
            retryable: true,
            status: None,
            message: format!("POST {path}: {e}"),
        })?;
        let status = resp.status().as_u16();
        let bytes = resp.bytes().await.map_err(|e| CallError {
            retryable: true,
            status: Some(status),
            message: format!("POST {path}: reading the answer: {e}"),
        })?;
        if !(200..300).contains(&status) {
            return Err(CallError {
                retryable: status == 503,
                status: Some(status),
                message: format!("POST {path}: {status} {}", String::from_utf8_lossy(&bytes)),
            });
        }
        if bytes.is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&bytes).map_err(|e| CallError {
            retryable: false,
            status: Some(status),
            message: format!("POST {path}: answer is not JSON: {e}"),
        })
    }
}
