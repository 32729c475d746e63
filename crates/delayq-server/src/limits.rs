//! The server's limits, checked before any work is done: body size, batch size, and the
//! longest wait, lease and delay a request may ask for; and the limits on connections that
//! keep slow or idle clients from holding the server (`server.rs`).

use std::time::Duration;

use crate::error::{ApiError, ApiResult};

/// Limits a request must keep to.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body in bytes.
    pub max_body_bytes: usize,
    /// Largest body of a route that carries no payload (receive, ack, nack without a new
    /// payload, extend, release, settings, dead-letter actions): enough for a full batch of
    /// receipts, not for megabytes.
    pub max_control_body_bytes: usize,
    /// Most messages (or receipts) in one batch request.
    pub max_batch: usize,
    /// Longest long-poll `wait`.
    pub max_wait: Duration,
    /// Longest lease a receive or extend may ask for.
    pub max_lease: Duration,
    /// Longest delay (or furthest deliver-at) of a send.
    pub max_delay: Duration,
    /// Longest a client may take to send a request's headers; also how long a connection
    /// may sit idle between requests.
    pub header_timeout: Duration,
    /// Longest a client may take to send a request's body, once its headers are in; holds
    /// for every route, whatever reads the body (`body_guard.rs`).
    pub body_timeout: Duration,
    /// Most event streams open at once on this server, and per token (beyond: 429).
    pub max_event_streams: usize,
    /// Most event streams open at once per token (a dashboard session counts as its token).
    pub max_event_streams_per_token: usize,
    /// Most events one page of events looks at, those its filter drops included.
    pub max_events_scanned: usize,
    /// About how many entries the audit log keeps (the oldest go first; `audit/record.rs`).
    pub audit_max_entries: usize,
    /// Most bytes of request bodies read and not yet answered, across the server: a body
    /// that would go beyond is refused (503 `server_busy`) instead of buffered.
    pub max_body_bytes_in_flight: usize,
    /// Largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// Most connections open at once; more are closed as soon as they are accepted.
    pub max_connections: usize,
    /// Most connections open at once from one peer address (`None`: no cap of its own);
    /// `serve` sets it when it listens on a non-loopback address, so that one client cannot
    /// take every slot.
    pub max_connections_per_peer: Option<usize>,
    /// Names besides loopback ones and IP addresses that a server without tokens answers
    /// to, and origins whose state changes it takes (`front_door.rs`; `--allow-host`).
    pub allowed_hosts: Vec<String>,
    /// Networks pushes may reach although they are loopback, private or link-local
    /// (`push/address.rs`); empty: only public addresses.
    pub push_allow: Vec<crate::push::address::Network>,
}

impl Default for Limits {
    /// 16 MiB bodies (256 KiB where no payload is carried), 256 MiB of bodies in flight,
    /// 1024 event streams (64 per token), pages of events that look at 10,000,
    /// batches of 1000, 30 s waits, 12 h leases, delays up to delayq's own ten-year limit;
    /// 10 s for headers, 30 s for a body, 16 KiB heads, 4096 connections.
    fn default() -> Self {
        Limits {
            max_body_bytes: 16 * 1024 * 1024,
            max_control_body_bytes: 256 * 1024,
            max_batch: delayq::MAX_BATCH,
            max_wait: Duration::from_secs(30),
            max_lease: Duration::from_secs(12 * 3600),
            max_delay: delayq::MAX_DELAY,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_body_bytes_in_flight: 256 * 1024 * 1024,
            max_event_streams: 1024,
            max_event_streams_per_token: 64,
            max_events_scanned: 10_000,
            audit_max_entries: 100_000,
            max_header_bytes: 16 * 1024,
            max_connections: 4096,
            max_connections_per_peer: None,
            allowed_hosts: Vec::new(),
            push_allow: Vec::new(),
        }
    }
}

impl Limits {
    /// A batch of `n` items: 1 to `max_batch`.
    pub fn check_batch(&self, n: usize) -> ApiResult<()> {
        if n == 0 {
            return Err(ApiError::bad_request(
                "empty_batch",
                "a batch needs at least one item",
            ));
        }
        if n > self.max_batch {
            return Err(ApiError::too_large(
                "batch_too_large",
                format!("a batch holds at most {} items, not {n}", self.max_batch),
            ));
        }
        Ok(())
    }

    /// A long-poll wait.
    pub fn check_wait(&self, wait: Duration) -> ApiResult<()> {
        over("wait", wait, self.max_wait)
    }

    /// A lease.
    pub fn check_lease(&self, lease: Duration) -> ApiResult<()> {
        over("lease", lease, self.max_lease)
    }

    /// A delay.
    pub fn check_delay(&self, delay: Duration) -> ApiResult<()> {
        over("delay", delay, self.max_delay)
    }
}

fn over(what: &str, asked: Duration, limit: Duration) -> ApiResult<()> {
    if asked > limit {
        return Err(ApiError::bad_request(
            "over_limit",
            format!(
                "{what} of {} is over the limit of {}",
                humantime::format_duration(asked),
                humantime::format_duration(limit)
            ),
        ));
    }
    Ok(())
}
