//! The servers' webhook runtime. Every server runs it; for each queue with webhooks, the one
//! that holds the queue's lease (`dq:webhooks:lease:<queue>`, taken with `SET NX PX` and
//! renewed every [`REFRESH`]) runs a dispatcher per webhook, so a webhook is called by one
//! server at a time. When that server goes, its lease runs out within [`LEASE`] and another
//! takes over from the places saved: events are delivered at least once.
//!
//! A dispatcher follows its webhook's events from its saved place, takes up to
//! [`CONCURRENCY`] at a time and sends each, retried with backoff ([`BACKOFF`], up to
//! [`ATTEMPTS`] tries: about ten minutes), then saves its place after them. An event that
//! fails every try is given up (counted in `delayq_webhook_requests_total{outcome="gave_up"}`
//! and logged), so one bad event cannot stop a webhook for good.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq::{DelayQ, Event, EventFilter, EventStart, QueueName};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use super::config::{self, Hook, Webhooks};
use super::request;
use crate::push::address::AddressPolicy;
use crate::push::clients::Clients;

/// How often the webhooks are read again and the leases renewed.
pub const REFRESH: Duration = Duration::from_secs(1);

/// How long a lease holds without renewal: how soon another server takes over a dead one's.
pub const LEASE: Duration = Duration::from_secs(10);

/// Requests at once, per webhook.
pub const CONCURRENCY: usize = 8;

/// Tries of one event, at most.
pub const ATTEMPTS: u32 = 12;

/// The pause before the second try; each next one doubles, up to [`MAX_BACKOFF`].
pub const BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(120);

/// How long a server's shutdown waits for its dispatchers.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long a dispatcher told to stop lets its requests under way finish.
const STOP_GRACE: Duration = Duration::from_secs(3);

/// One webhook being followed.
struct Dispatcher {
    hook: Hook,
    keys: Vec<String>,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
}

/// Calls every queue's webhooks whose lease this server holds, until `stop` completes.
pub async fn run(dq: DelayQ, clients: Clients, stop: impl Future<Output = ()>) {
    tokio::pin!(stop);
    let me = crate::push::signature::new_key();
    let mut running: HashMap<(QueueName, String), Dispatcher> = HashMap::new();
    loop {
        match config::all(&dq).await {
            Ok(queues) => {
                let mut wanted: HashMap<(QueueName, String), (Hook, Vec<String>)> = HashMap::new();
                for (queue, webhooks) in queues {
                    if webhooks.hooks.is_empty() {
                        continue;
                    }
                    match hold_lease(&dq, &queue, &me).await {
                        Ok(true) => add_wanted(&mut wanted, queue, webhooks),
                        Ok(false) => {}
                        Err(e) => tracing::warn!(queue = %queue, "webhook lease: {e}"),
                    }
                }
                // Stop what is no longer wanted as it runs (changed, removed, lease lost).
                running.retain(|key, d| {
                    let keep = wanted
                        .get(key)
                        .is_some_and(|(hook, keys)| *hook == d.hook && *keys == d.keys);
                    if !keep {
                        let _ = d.stop.send(true);
                    }
                    keep
                });
                for (key, (hook, keys)) in wanted {
                    if running.contains_key(&key) {
                        continue;
                    }
                    let (stop, stopped) = watch::channel(false);
                    let task = tokio::spawn(dispatch(
                        dq.clone(),
                        clients.clone(),
                        key.0.clone(),
                        hook.clone(),
                        keys.clone(),
                        stopped,
                    ));
                    running.insert(
                        key,
                        Dispatcher {
                            hook,
                            keys,
                            stop,
                            task,
                        },
                    );
                }
            }
            Err(e) => tracing::warn!("cannot read the webhooks: {e}"),
        }
        tokio::select! {
            () = tokio::time::sleep(REFRESH) => {}
            () = &mut stop => break,
        }
    }
    let mut held: Vec<QueueName> = running.keys().map(|(queue, _)| queue.clone()).collect();
    held.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    held.dedup();
    let tasks: Vec<JoinHandle<()>> = running
        .into_values()
        .map(|d| {
            let _ = d.stop.send(true);
            d.task
        })
        .collect();
    let all = async {
        for task in tasks {
            let _ = task.await;
        }
    };
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, all).await;
    // Places saved: another server may take over at once rather than after the lease.
    for queue in held {
        if let Err(e) = release_lease(&dq, &queue, &me).await {
            tracing::warn!(queue = %queue, "webhook lease not released (it runs out): {e}");
        }
    }
}

fn add_wanted(
    wanted: &mut HashMap<(QueueName, String), (Hook, Vec<String>)>,
    queue: QueueName,
    webhooks: Webhooks,
) {
    for hook in webhooks.hooks {
        let key = (queue.clone(), hook.url.clone());
        wanted.insert(key, (hook, webhooks.signing_keys.clone()));
    }
}

/// Takes or renews `queue`'s lease for `me`; false when another server holds it.
async fn hold_lease(dq: &DelayQ, queue: &QueueName, me: &str) -> delayq::Result<bool> {
    let key = lease_key(queue);
    let ms = LEASE.as_millis() as u64;
    let mut conn = dq.redis();
    let taken: Option<String> = redis::cmd("SET")
        .arg(&key)
        .arg(me)
        .arg("NX")
        .arg("PX")
        .arg(ms)
        .query_async(&mut conn)
        .await?;
    if taken.is_some() {
        return Ok(true);
    }
    let holder: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
    if holder.as_deref() != Some(me) {
        return Ok(false);
    }
    // Ours: renewed. (Between the GET and this, the lease could have run out and been
    // taken: then two servers call the webhook until the next round, a duplicate that at
    // least once allows.)
    let _: i64 = redis::cmd("PEXPIRE")
        .arg(&key)
        .arg(ms)
        .query_async(&mut conn)
        .await?;
    Ok(true)
}

/// Gives up `queue`'s lease if `me` holds it.
async fn release_lease(dq: &DelayQ, queue: &QueueName, me: &str) -> delayq::Result<()> {
    let key = lease_key(queue);
    let mut conn = dq.redis();
    let holder: Option<String> = redis::cmd("GET").arg(&key).query_async(&mut conn).await?;
    if holder.as_deref() == Some(me) {
        let _: i64 = redis::cmd("DEL").arg(&key).query_async(&mut conn).await?;
    }
    Ok(())
}

fn lease_key(queue: &QueueName) -> String {
    format!("dq:webhooks:lease:{}", queue.as_str())
}

/// Follows one webhook's events until told to stop.
async fn dispatch(
    dq: DelayQ,
    clients: Clients,
    queue: QueueName,
    hook: Hook,
    keys: Vec<String>,
    mut stop: watch::Receiver<bool>,
) {
    let Ok(url) = reqwest::Url::parse(&hook.url) else {
        return;
    };
    let client = clients.plain();
    let policy = clients.policy().clone();
    let mut reader = None;
    while !*stop.borrow() {
        if reader.is_none() {
            reader = match open(&dq, &queue, &hook).await {
                Ok(r) => Some(r),
                Err(e) => {
                    tracing::warn!(queue = %queue, url = %crate::redact::origin_of(&hook.url), "webhook cannot read events: {e}");
                    pause(&mut stop, REFRESH).await;
                    continue;
                }
            };
        }
        let Some(events) = reader.as_mut() else {
            continue;
        };
        let before = events.cursor();
        let read = tokio::select! {
            read = events.next(CONCURRENCY, Some(REFRESH)) => read,
            _ = stop.changed() => return,
        };
        let batch = match read {
            Ok(batch) => batch,
            Err(e) => {
                tracing::warn!(queue = %queue, url = %crate::redact::origin_of(&hook.url), "webhook cannot read events: {e}");
                reader = None;
                pause(&mut stop, REFRESH).await;
                continue;
            }
        };
        let mut sends = JoinSet::new();
        for event in batch {
            let (client, policy, url, keys, queue) = (
                client.clone(),
                policy.clone(),
                url.clone(),
                keys.clone(),
                queue.clone(),
            );
            sends.spawn(async move { deliver(&client, &policy, &url, &keys, &queue, event).await });
        }
        let done = async { while sends.join_next().await.is_some() {} };
        tokio::pin!(done);
        let stopping = tokio::select! {
            () = &mut done => false,
            _ = stop.changed() => true,
        };
        // Told to stop mid-batch: the requests under way get a grace to finish, so that the
        // place can be saved; past it, whoever follows next sends the batch again.
        if stopping && tokio::time::timeout(STOP_GRACE, &mut done).await.is_err() {
            return;
        }
        let after = events.cursor();
        if after != before {
            if let Err(e) = config::set_cursor(&dq, &queue, &hook.url, &after).await {
                tracing::warn!(queue = %queue, url = %crate::redact::origin_of(&hook.url), "webhook cannot save its place: {e}");
            }
        }
    }
}

/// A reader of `queue`'s events for `hook`, from its saved place (or from now, saved).
async fn open(dq: &DelayQ, queue: &QueueName, hook: &Hook) -> delayq::Result<delayq::EventReader> {
    let q = dq.queue(queue.as_str())?;
    let mut filter = EventFilter::new();
    for kind in &hook.kinds {
        filter = filter.kind(delayq::EventKind::parse(kind)?);
    }
    match config::cursor(dq, queue, &hook.url).await? {
        Some(cursor) => q.events(EventStart::After(cursor), filter).await,
        None => {
            let reader = q.events(EventStart::Now, filter).await?;
            config::set_cursor(dq, queue, &hook.url, &reader.cursor()).await?;
            Ok(reader)
        }
    }
}

/// Sends one event, retried with backoff; counts what became of it.
async fn deliver(
    client: &reqwest::Client,
    policy: &Arc<AddressPolicy>,
    url: &reqwest::Url,
    keys: &[String],
    queue: &QueueName,
    event: Event,
) {
    let body = request::body(queue.as_str(), &event);
    let mut pause = BACKOFF;
    for attempt in 1..=ATTEMPTS {
        let sent = request::send(
            client,
            policy,
            url,
            keys,
            (queue.as_str(), &event, attempt),
            &body,
        )
        .await;
        match sent {
            Ok(()) => {
                counter(queue, "delivered").increment(1);
                return;
            }
            Err(why) => {
                counter(queue, "failed").increment(1);
                tracing::debug!(queue = %queue, url = %crate::redact::origin(url), id = %event.id, attempt, "webhook request failed: {why}");
                if attempt == ATTEMPTS {
                    counter(queue, "gave_up").increment(1);
                    tracing::warn!(queue = %queue, url = %crate::redact::origin(url), id = %event.id, kind = %event.kind, "webhook gave up on an event after {ATTEMPTS} tries: {why}");
                    return;
                }
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_BACKOFF);
    }
}

fn counter(queue: &QueueName, outcome: &'static str) -> metrics::Counter {
    metrics::counter!("delayq_webhook_requests_total", "queue" => queue.as_str().to_owned(), "outcome" => outcome)
}

/// Waits `d`, or less if told to stop.
async fn pause(stop: &mut watch::Receiver<bool>, d: Duration) {
    tokio::select! {
        () = tokio::time::sleep(d) => {}
        _ = stop.changed() => {}
    }
}
