//! A queue's webhooks and where each is in the queue's events, kept in Redis so that every
//! server agrees: `dq:webhooks` (HASH queue → JSON [`Webhooks`]) lists every queue with
//! webhooks, `dq:webhooks:cursors` (HASH `<queue> <url>` → event cursor) where each webhook
//! has got to. Both are outside any queue's hash tag, as `dq:pushed` is: they are read and
//! written one command at a time.

use std::collections::HashMap;

use delayq::{DelayQ, EventCursor, EventFilter, EventKind, EventStart, Queue, QueueName, Setting};
use serde::{Deserialize, Serialize};

/// The queues with webhooks, with them.
const WEBHOOKS: &str = "dq:webhooks";

/// Each webhook's place in its queue's events.
const CURSORS: &str = "dq:webhooks:cursors";

/// Most webhooks of one queue.
pub const MAX_HOOKS: usize = 10;

/// One URL and the kinds of events it is called with, as stored and as the API takes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Hook {
    /// `http://` or `https://`.
    pub url: String,
    /// sent, delivered, acked, retry, released, dead, expired, superseded, cancelled,
    /// rescheduled, requeued, purged; none: every kind.
    #[serde(default)]
    pub kinds: Vec<String>,
}

impl Hook {
    /// Whether an event of `kind` goes to this webhook.
    pub fn wants(&self, kind: &EventKind) -> bool {
        self.kinds.is_empty() || self.kinds.iter().any(|k| k == kind.as_str())
    }
}

/// A queue's webhooks, and the keys their requests are signed with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Webhooks {
    /// The URLs, at most [`MAX_HOOKS`].
    pub hooks: Vec<Hook>,
    /// As a push target's (`push/signature.rs`): the current key, and while rotating the old.
    pub signing_keys: Vec<String>,
}

impl Webhooks {
    /// Checks everything but the addresses; returns each webhook's URL, parsed.
    pub fn validate(&self) -> Result<Vec<reqwest::Url>, String> {
        if self.hooks.len() > MAX_HOOKS {
            return Err(format!("a queue has at most {MAX_HOOKS} webhooks"));
        }
        let mut urls: Vec<reqwest::Url> = Vec::with_capacity(self.hooks.len());
        for hook in &self.hooks {
            let url = crate::push::target::parse_url(&hook.url, "url")?;
            if urls.contains(&url) {
                return Err(format!("the webhook {:?} is given twice", hook.url));
            }
            for kind in &hook.kinds {
                EventKind::parse(kind).map_err(|e| e.to_string())?;
            }
            urls.push(url);
        }
        if self.signing_keys.is_empty()
            || self.signing_keys.len() > 2
            || self
                .signing_keys
                .iter()
                .any(|k| k.len() < 16 || k.len() > 256)
        {
            return Err(
                "give one signing key of 16 to 256 characters, or two while rotating".into(),
            );
        }
        Ok(urls)
    }
}

/// The webhooks of `queue`, if it has some.
pub async fn load(dq: &DelayQ, queue: &QueueName) -> delayq::Result<Option<Webhooks>> {
    let mut conn = dq.redis();
    let text: Option<String> = redis::cmd("HGET")
        .arg(WEBHOOKS)
        .arg(queue.as_str())
        .query_async(&mut conn)
        .await?;
    Ok(text.and_then(|t| readable(queue, &t)))
}

/// Stores `webhooks` (checked) for `queue`, in place of those it had, and turns the
/// queue's events on if they are off. A webhook new to it starts now (at the queue's events
/// from this moment on), one it had keeps its place, and one it no longer has loses it.
pub async fn save(dq: &DelayQ, queue: &Queue, webhooks: &Webhooks) -> delayq::Result<()> {
    let json = serde_json::to_string(webhooks)
        .map_err(|e| delayq::Error::Protocol(format!("webhooks: {e}")))?;
    if queue.stats().await?.events_kept.is_none() {
        queue
            .configure(&[Setting::Events(Some(delayq::DEFAULT_EVENTS_KEPT))])
            .await?;
    }
    let now = queue
        .events(EventStart::Now, EventFilter::new())
        .await?
        .cursor();
    let name = queue.name();
    let dropped: Vec<Hook> = load(dq, name)
        .await?
        .map(|old| old.hooks)
        .unwrap_or_default()
        .into_iter()
        .filter(|old| !webhooks.hooks.iter().any(|h| h.url == old.url))
        .collect();
    let mut conn = dq.redis();
    for hook in &webhooks.hooks {
        let _: i64 = redis::cmd("HSETNX")
            .arg(CURSORS)
            .arg(cursor_field(name, &hook.url))
            .arg(now.to_string())
            .query_async(&mut conn)
            .await?;
    }
    let _: i64 = redis::cmd("HSET")
        .arg(WEBHOOKS)
        .arg(name.as_str())
        .arg(json)
        .query_async(&mut conn)
        .await?;
    forget_places(dq, name, &dropped).await
}

/// Removes the webhooks of `queue` and their places; false if it had none.
pub async fn remove(dq: &DelayQ, queue: &QueueName) -> delayq::Result<bool> {
    let Some(webhooks) = load(dq, queue).await? else {
        return Ok(false);
    };
    let mut conn = dq.redis();
    let _: i64 = redis::cmd("HDEL")
        .arg(WEBHOOKS)
        .arg(queue.as_str())
        .query_async(&mut conn)
        .await?;
    forget_places(dq, queue, &webhooks.hooks).await?;
    Ok(true)
}

/// Drops the places of `hooks` of `queue`.
async fn forget_places(dq: &DelayQ, queue: &QueueName, hooks: &[Hook]) -> delayq::Result<()> {
    let mut conn = dq.redis();
    for hook in hooks {
        let _: i64 = redis::cmd("HDEL")
            .arg(CURSORS)
            .arg(cursor_field(queue, &hook.url))
            .query_async(&mut conn)
            .await?;
    }
    Ok(())
}

/// Every queue with webhooks, with them.
pub async fn all(dq: &DelayQ) -> delayq::Result<Vec<(QueueName, Webhooks)>> {
    let mut conn = dq.redis();
    let entries: HashMap<String, String> = redis::cmd("HGETALL")
        .arg(WEBHOOKS)
        .query_async(&mut conn)
        .await?;
    let mut out: Vec<(QueueName, Webhooks)> = entries
        .into_iter()
        .filter_map(|(name, text)| {
            let queue = QueueName::new(&name).ok()?;
            let webhooks = readable(&queue, &text)?;
            Some((queue, webhooks))
        })
        .collect();
    out.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    Ok(out)
}

/// Where the webhook of `queue` at `url` has got to, if it has a place.
pub async fn cursor(
    dq: &DelayQ,
    queue: &QueueName,
    url: &str,
) -> delayq::Result<Option<EventCursor>> {
    let mut conn = dq.redis();
    let text: Option<String> = redis::cmd("HGET")
        .arg(CURSORS)
        .arg(cursor_field(queue, url))
        .query_async(&mut conn)
        .await?;
    Ok(text.and_then(|t| EventCursor::parse(&t).ok()))
}

/// Moves the webhook of `queue` at `url` on to `cursor`.
pub async fn set_cursor(
    dq: &DelayQ,
    queue: &QueueName,
    url: &str,
    cursor: &EventCursor,
) -> delayq::Result<()> {
    let mut conn = dq.redis();
    let _: i64 = redis::cmd("HSET")
        .arg(CURSORS)
        .arg(cursor_field(queue, url))
        .arg(cursor.to_string())
        .query_async(&mut conn)
        .await?;
    Ok(())
}

fn cursor_field(queue: &QueueName, url: &str) -> String {
    // A queue name has no space, so the field splits back unambiguously.
    format!("{} {url}", queue.as_str())
}

fn readable(queue: &QueueName, text: &str) -> Option<Webhooks> {
    match serde_json::from_str(text) {
        Ok(webhooks) => Some(webhooks),
        Err(e) => {
            tracing::warn!(queue = %queue, "unreadable webhooks: {e}");
            None
        }
    }
}
