//! A queue's push target: where its messages go and how, stored in Redis so that every
//! server agrees. The library keeps it as JSON with the queue's push-delivery flag
//! (`Queue::set_push_target`: `dq:{q}:push`, under the queue's hash tag, changed with the flag
//! in one step), and `dq:pushed` lists the queues that have one, for the servers' push
//! runtimes to find: an index in another slot, written before a target is saved and removed
//! after, so it may hold a stale name (skipped) but never misses a queue with a target.

use crate::push_envelope::Destination;
use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{DelayQ, Queue};
use serde::{Deserialize, Serialize};

/// The set of queues with a push target.
const PUSHED_QUEUES: &str = "dq:pushed";

/// Longest request timeout.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// Most requests at once, per server, per target.
pub const MAX_CONCURRENCY: usize = 1000;

/// Where a queue's messages are pushed, and how.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PushTarget {
    /// `http://` or `https://`.
    pub url: String,
    /// POST (default), PUT or PATCH.
    pub method: String,
    /// Extra request headers.
    pub headers: BTreeMap<String, String>,
    /// How long one request may take, ms.
    pub timeout_ms: u64,
    /// Most requests at once, per server.
    pub concurrency: usize,
    /// Keys the requests are signed with (`signature.rs`): the first is current, a second is
    /// the one being rotated out.
    pub signing_keys: Vec<String>,
    /// Statuses that make a message a dead letter at once; `None`: every 4xx but 408 and 429.
    pub dead_statuses: Option<Vec<u16>>,
    /// Called once (POST, signed) with a message and its errors when it becomes a dead letter.
    pub failure_callback: Option<String>,
    /// Follow redirects (at most 5, each to an address the server may reach).
    pub follow_redirects: bool,
    /// Origins (`https://hooks.example.com`, `http://10.1.2.3:8080`) that a message's own
    /// URL may be on; empty: messages cannot bring a URL. Targets stored before this field
    /// existed read as empty.
    #[serde(default)]
    pub allow_message_urls: Vec<String>,
}

/// Most origins a target may allow messages to be pushed to.
pub const MAX_ALLOWED_ORIGINS: usize = 32;

impl PushTarget {
    /// Checks everything but the addresses (`address::check_url` does that); returns the
    /// target's URL and its failure callback's, parsed.
    pub fn validate(&self) -> Result<(reqwest::Url, Option<reqwest::Url>), String> {
        let url = parse_url(&self.url, "url")?;
        let callback = match &self.failure_callback {
            Some(callback) => Some(parse_url(callback, "failure_callback")?),
            None => None,
        };
        if !["POST", "PUT", "PATCH"].contains(&self.method.as_str()) {
            return Err(format!(
                "method is POST, PUT or PATCH, not {:?}",
                self.method
            ));
        }
        if self.timeout_ms == 0 || Duration::from_millis(self.timeout_ms) > MAX_TIMEOUT {
            return Err(format!("timeout is 1 ms to {}s", MAX_TIMEOUT.as_secs()));
        }
        if self.concurrency == 0 || self.concurrency > MAX_CONCURRENCY {
            return Err(format!("concurrency is 1 to {MAX_CONCURRENCY}"));
        }
        if self.signing_keys.is_empty() || self.signing_keys.len() > 2 {
            return Err("give one signing key, or two while rotating".into());
        }
        if self
            .signing_keys
            .iter()
            .any(|k| k.len() < 16 || k.len() > 256)
        {
            return Err("a signing key is 16 to 256 characters".into());
        }
        super::headers::check("headers", &self.headers)?;
        if self.allow_message_urls.len() > MAX_ALLOWED_ORIGINS {
            return Err(format!(
                "allow_message_urls: at most {MAX_ALLOWED_ORIGINS} origins"
            ));
        }
        for origin in &self.allow_message_urls {
            if origin_of(origin)? != *origin {
                return Err(format!(
                    "allow_message_urls: {origin:?} is not an origin such as \
                     https://hooks.example.com"
                ));
            }
        }
        if let Some(statuses) = &self.dead_statuses {
            if statuses.iter().any(|s| !(100..=599).contains(s)) {
                return Err("dead_statuses are HTTP statuses, 100 to 599".into());
            }
        }
        Ok((url, callback))
    }

    /// Whether a message's own URL may be pushed to: its scheme, host and port are those of
    /// an allowed origin, exactly.
    pub fn allows_message_url(&self, url: &reqwest::Url) -> bool {
        let origin = url.origin().ascii_serialization();
        self.allow_message_urls.contains(&origin)
    }

    /// Whether `status` makes a message a dead letter at once.
    pub fn is_dead_status(&self, status: u16) -> bool {
        match &self.dead_statuses {
            Some(list) => list.contains(&status),
            None => (400..500).contains(&status) && status != 408 && status != 429,
        }
    }
}

/// Checks a message's own push URL as a target's is checked (its address is checked when it
/// is pushed).
pub fn check_destination_url(text: &str) -> Result<(), String> {
    parse_url(text, "push.url").map(drop)
}

/// The origin (`scheme://host[:port]`, the port only when it is not the scheme's default) of
/// an entry of `allow_message_urls`: an http or https URL with nothing after its host and
/// port but an optional `/`.
pub fn origin_of(text: &str) -> Result<String, String> {
    let url = parse_url(text, "allow_message_urls")?;
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(format!(
            "allow_message_urls: {text:?} is not an origin such as https://hooks.example.com \
             (no path, no query)"
        ));
    }
    Ok(url.origin().ascii_serialization())
}

/// `allow_message_urls` as given, each made an origin ([`origin_of`]).
pub fn allowed_origins(given: Vec<String>) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::with_capacity(given.len());
    for text in given {
        let origin = origin_of(&text)?;
        if !out.contains(&origin) {
            out.push(origin);
        }
    }
    Ok(out)
}

/// An http(s) URL with a host and no credentials, or why not (`field` names it).
pub fn parse_url(text: &str, field: &str) -> Result<reqwest::Url, String> {
    let url = reqwest::Url::parse(text).map_err(|e| format!("{field} {text:?}: {e}"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(format!(
            "{field} must be an http:// or https:// URL with a host"
        ));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "{field}: put credentials in headers, not in the URL"
        ));
    }
    Ok(url)
}

/// The target of `queue`, if it has one.
pub async fn load(_dq: &DelayQ, queue: &Queue) -> delayq::Result<Option<PushTarget>> {
    let text = queue.push_target().await?;
    Ok(text.and_then(|t| match serde_json::from_str(&t) {
        Ok(target) => Some(target),
        Err(e) => {
            tracing::warn!(queue = %queue.name(), "unreadable push target: {e}");
            None
        }
    }))
}

/// Stores `target` for `queue` and turns push delivery on. The queue goes into the index
/// first, so that no queue with a target is missing from it; the target and the queue's
/// push-delivery flag then change in one step (`Queue::set_push_target`). A failure before
/// that step leaves the queue as it was (and maybe a stale index entry, which is harmless).
pub async fn save(dq: &DelayQ, queue: &Queue, target: &PushTarget) -> delayq::Result<()> {
    let json = serde_json::to_string(target)
        .map_err(|e| delayq::Error::Protocol(format!("push target: {e}")))?;
    let mut conn = dq.redis();
    let _: i64 = redis::cmd("SADD")
        .arg(PUSHED_QUEUES)
        .arg(queue.name().as_str())
        .query_async(&mut conn)
        .await?;
    queue.set_push_target(&json).await
}

/// Removes the target of `queue` and turns push delivery off, in one step; false (and
/// nothing written) if it had none. The index entry goes after: if that fails, the entry is
/// stale, which every reader tolerates (a queue listed without a target is skipped).
pub async fn remove(dq: &DelayQ, queue: &Queue) -> delayq::Result<bool> {
    if !queue.remove_push_target().await? {
        return Ok(false);
    }
    if let Err(e) = forget(dq, queue.name()).await {
        tracing::warn!(queue = %queue.name(), "push target removed, but not from the index (harmless): {e}");
    }
    Ok(true)
}

/// Takes `queue` out of the index of pushed queues (its target is gone: removed, or
/// deleted with the queue's keys).
pub async fn forget(dq: &DelayQ, queue: &delayq::QueueName) -> delayq::Result<()> {
    let mut conn = dq.redis();
    let _: i64 = redis::cmd("SREM")
        .arg(PUSHED_QUEUES)
        .arg(queue.as_str())
        .query_async(&mut conn)
        .await?;
    Ok(())
}

/// Every queue in the index of pushed queues, with its target (`None`: a stale entry, left
/// by a change that failed part-way).
pub async fn indexed(dq: &DelayQ) -> delayq::Result<Vec<(Queue, Option<PushTarget>)>> {
    let mut conn = dq.redis();
    let names: Vec<String> = redis::cmd("SMEMBERS")
        .arg(PUSHED_QUEUES)
        .query_async(&mut conn)
        .await?;
    let mut out = Vec::new();
    for name in names {
        let Ok(queue) = dq.queue(&name) else { continue };
        let target = load(dq, &queue).await?;
        out.push((queue, target));
    }
    Ok(out)
}

/// Every queue with a push target, with it.
pub async fn all(dq: &DelayQ) -> delayq::Result<Vec<(Queue, PushTarget)>> {
    Ok(indexed(dq)
        .await?
        .into_iter()
        .filter_map(|(queue, target)| Some((queue, target?)))
        .collect())
}

/// Checks a message's own destination as its sender gave it: the URL's form (its origin is
/// checked against the queue's target, and its address when it is pushed) and the headers
/// (`headers.rs`).
pub fn check_destination(destination: &Destination) -> Result<(), String> {
    if let Some(url) = &destination.url {
        check_destination_url(url)?;
    }
    super::headers::check("push.headers", &destination.headers)
}
