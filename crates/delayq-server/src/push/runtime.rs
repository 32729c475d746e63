//! A server's push runtime: for every queue with a push target, a worker whose handler is
//! the HTTP request (`deliver.rs`). Every server runs one: leases keep one request per
//! message at a time, and a server that dies mid-request leaves the message to come back
//! after its lease, to whichever server claims it then.
//!
//! Targets are read again every second. A worker whose target changed stops claiming at
//! once and drains in the background: its requests run to their end (each is bounded by the
//! target's timeout, and the worker's grace is longer), are settled as usual, and only then
//! does it go, so a message is never handed out again while its request may still run. The
//! new target's worker starts at once beside it. The lease covers the request timeout and a
//! margin, and the worker extends it while a request runs.
//!
//! At shutdown every worker is told to stop at once, and they are awaited together for up
//! to [`SHUTDOWN_GRACE`]; those still running then are dropped, which cuts their requests
//! and leaves their messages held until their leases pass (never released early: the
//! receiver may still be working on them).

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{DeadLettered, DelayQ, Queue, QueueName, QueueSet};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::address::check_url;
use super::callbacks::Callbacks;
use super::clients::Clients;
use super::deliver;
use super::target::{self, PushTarget};

/// How often targets are read again.
const REFRESH: Duration = Duration::from_secs(1);

/// How often a worker adds its push answers to the queue's history.
const TALLY_EVERY: Duration = Duration::from_secs(1);

/// Lease beyond the request timeout.
const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// How long a server's shutdown waits for its workers' requests before it cuts them.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Beyond the request timeout, what a push may take (resolving a message's own host first)
/// before it counts as timed out; a stopping worker waits this plus a second for it.
const PUSH_MARGIN: Duration = Duration::from_secs(5);

/// A worker serving a target.
struct Running {
    target: PushTarget,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

/// Runs pushes for every queue with a target until `stop` completes; then stops the workers,
/// letting requests in flight finish.
pub async fn run(
    dq: DelayQ,
    clients: Clients,
    callbacks: Callbacks,
    stop: impl Future<Output = ()>,
) {
    tokio::pin!(stop);
    let mut running: HashMap<QueueName, Running> = HashMap::new();
    // Workers told to stop (their target changed or went) whose requests are finishing.
    let mut draining: Vec<JoinHandle<()>> = Vec::new();
    let mut repaired: HashSet<QueueName> = HashSet::new();
    loop {
        match target::indexed(&dq).await {
            Ok(entries) => {
                let mut targets = Vec::new();
                let mut stale = Vec::new();
                for (queue, target) in entries {
                    match target {
                        Some(target) => targets.push((queue, target)),
                        None => stale.push(queue),
                    }
                }
                repair(&mut repaired, stale).await;
                callbacks.watch(
                    targets
                        .iter()
                        .filter(|(_, t)| t.failure_callback.is_some())
                        .map(|(q, _)| q.name().clone())
                        .collect(),
                );
                let workers = Workers {
                    clients: &clients,
                    callbacks: &callbacks,
                };
                reconcile(&workers, &mut running, &mut draining, targets).await;
            }
            Err(e) => tracing::warn!("push: cannot read targets: {e}"),
        }
        draining.retain(|task| !task.is_finished());
        tokio::select! {
            () = tokio::time::sleep(REFRESH) => {}
            () = &mut stop => break,
        }
    }
    for (_, r) in running.drain() {
        let _ = r.stop.send(());
        draining.push(r.task);
    }
    // Every worker was told at once and runs in its own task: awaiting them in turn takes
    // as long as the slowest.
    let all = async {
        for task in draining.iter_mut() {
            let _ = task.await;
        }
    };
    if tokio::time::timeout(SHUTDOWN_GRACE, all).await.is_err() {
        tracing::warn!("push: requests still running at shutdown are cut; their messages are pushed again after their leases");
        for task in draining {
            if !task.is_finished() {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

/// A queue listed in the index without a target was left so by a change that failed
/// part-way: its partitions' push-delivery flags may still be set, so nobody would consume
/// them. Each is repaired once (`repaired` remembers it while it stays so).
async fn repair(repaired: &mut HashSet<QueueName>, stale: Vec<Queue>) {
    repaired.retain(|name| stale.iter().any(|q| q.name() == name));
    for queue in stale {
        if repaired.contains(queue.name()) {
            continue;
        }
        match queue.sync_push_delivery().await {
            Ok(false) => {
                repaired.insert(queue.name().clone());
            }
            // A target was set meanwhile: the next round starts its worker.
            Ok(true) => {}
            Err(e) => {
                tracing::warn!(queue = %queue.name(), "push: cannot repair a queue without a target: {e}")
            }
        }
    }
}

/// What starting a worker takes.
struct Workers<'a> {
    clients: &'a Clients,
    callbacks: &'a Callbacks,
}

async fn reconcile(
    workers: &Workers<'_>,
    running: &mut HashMap<QueueName, Running>,
    draining: &mut Vec<JoinHandle<()>>,
    targets: Vec<(Queue, PushTarget)>,
) {
    let wanted: HashMap<QueueName, (Queue, PushTarget)> = targets
        .into_iter()
        .map(|(q, t)| (q.name().clone(), (q, t)))
        .collect();
    let stale: Vec<QueueName> = running
        .iter()
        .filter(|(name, r)| wanted.get(*name).is_none_or(|(_, t)| *t != r.target))
        .map(|(name, _)| name.clone())
        .collect();
    for name in stale {
        if let Some(r) = running.remove(&name) {
            // Not awaited: it drains while the new target's worker (if any) starts.
            let _ = r.stop.send(());
            draining.push(r.task);
        }
    }
    for (name, (queue, target)) in wanted {
        if running.contains_key(&name) {
            continue;
        }
        match start(workers, queue, target.clone()).await {
            Ok((stop, task)) => {
                running.insert(name, Running { target, stop, task });
            }
            Err(e) => tracing::error!(queue = %name, "push: not delivering: {e}"),
        }
    }
}

/// Starts the worker of one target.
async fn start(
    workers: &Workers<'_>,
    queue: Queue,
    mut target: PushTarget,
) -> Result<(oneshot::Sender<()>, JoinHandle<()>), String> {
    // A target stored before the header rules (`headers.rs`) may hold a header they refuse:
    // it is left out of the requests rather than stopping the queue's delivery.
    target.headers.retain(|name, _| {
        let reserved = super::headers::is_reserved(name);
        if reserved {
            tracing::warn!(queue = %queue.name(), header = %name, "push: a header of the target is not sent");
        }
        !reserved
    });
    let (url, _) = target.validate()?;
    let clients = workers.clients;
    check_url(clients.policy(), &url)
        .await
        .map_err(|e| e.detailed())?;
    // Every partition's push-delivery flag set, in case a change failed part-way (or an
    // older version left one unset): otherwise that partition's messages would stay put.
    match queue.sync_push_delivery().await {
        Ok(true) => {}
        Ok(false) => return Err("the target was removed meanwhile".into()),
        Err(e) => return Err(format!("cannot turn push delivery on: {e}")),
    }
    let timeout = Duration::from_millis(target.timeout_ms);
    let lease = timeout + LEASE_MARGIN;
    let client = clients.for_target(&target);
    let target = Arc::new(target);
    // A stopping worker waits for its pushes, each bounded below: none is handed back
    // while it may still run.
    let mut builder = WorkerBuilder::serving(QueueSet::single(queue.clone()).pushing())
        .concurrency(target.concurrency)
        .batch_size(target.concurrency.min(100))
        .lease(lease)
        .shutdown_grace(timeout + PUSH_MARGIN + Duration::from_secs(1));
    if target.failure_callback.is_some() {
        // Queued for the server's callback senders (`callbacks.rs`): never waits.
        let callbacks = workers.callbacks.clone();
        builder = builder.on_dead_letter(move |dead: &DeadLettered| {
            callbacks.report(dead);
        });
    }
    let tally = Arc::new(deliver::Tally::default());
    let pusher = Arc::new(deliver::Pusher::new(
        client,
        clients.policy().clone(),
        queue.name().as_str(),
        target.clone(),
        tally.clone(),
    )?);
    let worker = builder
        .build(move |delivery| {
            let pusher = pusher.clone();
            async move {
                // The request has its own timeout; this bounds the rest (a slow resolver).
                match tokio::time::timeout(timeout + PUSH_MARGIN, pusher.push(&delivery)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(delayq::worker::Failure::retry(format!(
                        "timed out after {:?}",
                        timeout + PUSH_MARGIN
                    ))),
                }
            }
        })
        .map_err(|e| e.to_string())?;
    let (stop, stopped) = oneshot::channel::<()>();
    let name = queue.name().clone();
    let task = tokio::spawn(async move {
        let stopped = async move {
            let _ = stopped.await;
        };
        let run = worker.run(stopped);
        tokio::pin!(run);
        let mut tick = tokio::time::interval(TALLY_EVERY);
        let result = loop {
            tokio::select! {
                result = &mut run => break result,
                _ = tick.tick() => add_tally(&queue, &tally).await,
            }
        };
        add_tally(&queue, &tally).await;
        if let Err(e) = result {
            tracing::error!(queue = %name, "push worker stopped: {e}");
        }
    });
    Ok((stop, task))
}

/// Adds the answers counted since the last time to the queue's history (the dashboard's
/// chart of push answers). A failure loses one second's counts, never a message.
async fn add_tally(queue: &Queue, tally: &deliver::Tally) {
    let counts = tally.take();
    if let Err(e) = queue.add_push_responses(&counts).await {
        tracing::warn!(queue = %queue.name(), "push: cannot record answers in the history: {e}");
    }
}
