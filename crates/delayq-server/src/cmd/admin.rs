//! Admin commands: each one library call against Redis, answered as a readable table for a
//! person or as JSON (`--json`) for scripts. Exit code 0 on success; otherwise one line on
//! stderr (printed by `main.rs`) and a non-zero code.

use std::time::{Duration, UNIX_EPOCH};

use anyhow::{bail, Context};
use delayq::{CancelOutcome, PayloadKind, Schedule, SendOptions, Stats};
use delayq_server::api::upsert_args::{IfInFlightArg, OnDuplicateArg, UpsertArgs};
use delayq_server::deletion::DeletedOut;
use serde_json::{json, Value};

use super::common::{parse_backoff, payload_text, print, stats_json, time_text, Common};

/// The admin commands.
#[derive(clap::Subcommand)]
pub enum AdminCommand {
    /// Send a message.
    Send {
        #[command(flatten)]
        common: Common,
        queue: String,
        /// The payload (text; with --json-payload, a JSON document).
        payload: String,
        /// Due after this long (e.g. 15m, 3days).
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at")]
        delay: Option<Duration>,
        /// Due at this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        at: Option<std::time::SystemTime>,
        /// Your own id (idempotent send; cancel by it later).
        #[arg(long)]
        id: Option<String>,
        /// Deliveries before the message goes to the dead letters.
        #[arg(long)]
        max_attempts: Option<u16>,
        /// Retry policy: fixed:30s, exponential:1s..10m, linear:30s..10m or list:30s,2m,10m
        /// (the last delay repeats).
        #[arg(long)]
        backoff: Option<String>,
        /// Shorten each retry delay at random by up to this percentage.
        #[arg(long, requires = "backoff")]
        jitter: Option<u8>,
        /// 0 (lowest) to 9 (highest), default 5: due messages of higher priority go first.
        #[arg(long)]
        priority: Option<u8>,
        /// Its group (a tenant, a customer, an order): groups take turns, and the queue's
        /// group concurrency bounds each one's messages in flight.
        #[arg(long)]
        group: Option<String>,
        /// Never delivered more than this long after it is due (e.g. 15m): later, it expires.
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "expires_at")]
        ttl: Option<std::time::Duration>,
        /// Never delivered at or after this time (RFC 3339).
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        expires_at: Option<std::time::SystemTime>,
        /// Longest a worker may spend on it (e.g. 90s), in place of the worker's own limit.
        #[arg(long, value_parser = humantime::parse_duration)]
        handler_timeout: Option<std::time::Duration>,
        /// With --id, when a message with that id exists: keep it (a duplicate), replace
        /// it, or debounce it (with --max-wait).
        #[arg(long, value_enum, requires = "id")]
        on_duplicate: Option<OnDuplicateArg>,
        /// A debounce is never due later than this after the first send it replaced in
        /// turn (e.g. 30s).
        #[arg(long, value_parser = humantime::parse_duration)]
        max_wait: Option<std::time::Duration>,
        /// A replace or debounce of a message in flight: send a second message (the one in
        /// flight is superseded) or refuse.
        #[arg(long, value_enum)]
        if_in_flight: Option<IfInFlightArg>,
        /// The payload is JSON: consumers get it back as JSON.
        #[arg(long)]
        json_payload: bool,
    },
    /// Show one message.
    Get {
        #[command(flatten)]
        common: Common,
        queue: String,
        id: String,
    },
    /// Cancel a delayed or ready message.
    Cancel {
        #[command(flatten)]
        common: Common,
        queue: String,
        id: String,
    },
    /// Move a delayed or ready message to a new due time.
    Reschedule {
        #[command(flatten)]
        common: Common,
        queue: String,
        id: String,
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at", required_unless_present = "at")]
        delay: Option<Duration>,
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        at: Option<std::time::SystemTime>,
    },
    /// Counts per state of one queue, or of every queue.
    Stats {
        #[command(flatten)]
        common: Common,
        queue: Option<String>,
    },
    /// The queues in this Redis.
    Queues {
        #[command(flatten)]
        common: Common,
    },
    /// Create a queue spread over several partitions (hash tags; on a Redis Cluster, spread
    /// over the masters). A queue is otherwise created with one partition by its first use,
    /// and its partition count never changes.
    CreateQueue {
        #[command(flatten)]
        common: Common,
        queue: String,
        /// How many partitions (1 to 256).
        #[arg(long)]
        partitions: u16,
    },
    /// Delete a queue: its settings, schedules, events, history, push target and webhooks,
    /// in batches of a bounded size. Refused while it holds messages unless --force, which
    /// deletes them too.
    DeleteQueue {
        #[command(flatten)]
        common: Common,
        queue: String,
        /// Delete the messages it holds too (pending, in flight and dead).
        #[arg(long)]
        force: bool,
    },
    /// Pause a queue: no consumer is given a message until it is resumed. Sends are still
    /// accepted; messages in flight settle as usual.
    Pause {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Resume a paused queue.
    Resume {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Change a queue's settings.
    Configure(super::configure::ConfigureArgs),
    /// A queue's events (each change of a message's state), or --follow them live.
    Events(super::events::EventsArgs),
    /// Dead letters: list, requeue, purge.
    #[command(subcommand)]
    Dead(DeadCommand),
    /// Recurring schedules: put, get, list, delete.
    #[command(subcommand)]
    Schedule(super::schedule::ScheduleCommand),
    /// Push delivery: set, get, remove a queue's push target.
    #[command(subcommand)]
    Push(super::push::PushCommand),
    /// Webhooks: add, list, remove the URLs a queue's events are sent to.
    #[command(subcommand)]
    Webhooks(super::webhooks::WebhooksCommand),
    /// Data formats: show each queue's and the processes running, upgrade queues.
    #[command(subcommand)]
    Format(super::format::FormatCommand),
    /// Groups: list a queue's, show one, pause, resume or set one's concurrency and weight.
    #[command(subcommand)]
    Groups(super::groups::GroupsCommand),
}

/// Dead-letter commands.
#[derive(clap::Subcommand)]
pub enum DeadCommand {
    /// List dead letters, oldest death first.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
        #[arg(long, default_value_t = 0)]
        offset: u64,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Put dead letters back as ready (one by id, or --all).
    Requeue(DeadTarget),
    /// Delete dead letters (one by id, or --all).
    Purge(DeadTarget),
}

/// One dead letter by id, or all of a queue's.
#[derive(clap::Args)]
pub struct DeadTarget {
    #[command(flatten)]
    common: Common,
    queue: String,
    #[arg(required_unless_present = "all")]
    id: Option<String>,
    #[arg(long, conflicts_with = "id")]
    all: bool,
}

pub async fn run(command: AdminCommand) -> anyhow::Result<()> {
    match command {
        AdminCommand::Send {
            common,
            queue,
            payload,
            delay,
            at,
            id,
            max_attempts,
            backoff,
            jitter,
            priority,
            group,
            ttl,
            expires_at,
            handler_timeout,
            on_duplicate,
            max_wait,
            if_in_flight,
            json_payload,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            let mut options = SendOptions::new().schedule(schedule(delay, at)?);
            if let Some(id) = id {
                options = options.id(id);
            }
            if let Some(n) = max_attempts {
                options = options.max_attempts(n);
            }
            if let Some(spec) = backoff {
                let backoff = parse_backoff(&spec).map_err(|e| anyhow::anyhow!("--backoff {e}"))?;
                options = options.backoff(backoff.with_jitter(jitter.unwrap_or(0)));
            }
            if let Some(timeout) = handler_timeout {
                options = options.handler_timeout(timeout);
            }
            if let Some(priority) = priority {
                options = options.priority(priority);
            }
            if let Some(group) = group {
                options = options.group(group);
            }
            if let Some(ttl) = ttl {
                options = options.ttl(ttl);
            }
            if let Some(at) = expires_at {
                options = options.expires_at(unix_ms(at));
            }
            let upsert = UpsertArgs {
                on_duplicate,
                max_wait,
                if_in_flight,
            };
            options = upsert
                .apply(options)
                .map_err(|e| anyhow::anyhow!("{}", e.message()))?;
            if json_payload {
                serde_json::from_str::<Value>(&payload).context("--json-payload: not JSON")?;
                options = options.kind(PayloadKind::Json);
            }
            let sent = q.send(payload.as_bytes(), &options).await?;
            let replaced = sent.replaced.map(|state| state.as_str());
            let out = json!({ "id": sent.id, "due_ms": sent.due_ms, "duplicate": sent.duplicate,
                "replaced": replaced });
            print(&common, &out, || {
                let due = sent.due_ms.map_or("-".into(), time_text);
                let note = match (sent.duplicate, replaced) {
                    (true, _) => " (duplicate: already there)".to_owned(),
                    (false, Some(state)) => format!(" (replaced one {})", state.replace('_', " ")),
                    (false, None) => String::new(),
                };
                format!("{}  due {due}{note}", sent.id)
            })
        }
        AdminCommand::Get { common, queue, id } => {
            let q = common.connect().await?.queue(&queue)?;
            let Some(m) = q.get(&id).await? else {
                bail!("message {id} not found in {queue}");
            };
            let payload = payload_text(&m.payload, m.kind);
            let out = json!({
                "id": m.id, "state": m.state.as_str(), "due_ms": m.due_ms,
                "attempts": m.attempts, "max_attempts": m.max_attempts,
                "priority": m.priority, "group": m.group, "expires_at_ms": m.expires_at_ms,
                "debounce_until_ms": m.debounce_until_ms, "traceparent": m.traceparent,
                "outcome": m.completion.as_ref().map(|c| c.outcome.as_str()),
                "sent_at_ms": m.completion.as_ref().and_then(|c| c.sent_at_ms),
                "first_delivered_at_ms": m.completion.as_ref().and_then(|c| c.first_delivered_at_ms),
                "finished_at_ms": m.completion.as_ref().map(|c| c.finished_at_ms),
                "last_error": m.last_error, "payload": payload,
                "errors": m.errors.iter().map(|e| json!({
                    "attempt": e.attempt, "at_ms": e.at_ms, "error": e.error,
                })).collect::<Vec<_>>(),
            });
            print(&common, &out, || {
                let mut t = format!(
                    "id          {}\nstate       {}\ndue         {}\nattempts    {} of {}\npriority    {}\n",
                    m.id,
                    m.state,
                    time_text(m.due_ms),
                    m.attempts,
                    m.max_attempts,
                    m.priority
                );
                if let Some(done) = &m.completion {
                    let known = |ms: Option<u64>| ms.map_or("unknown".into(), time_text);
                    t.push_str(&format!(
                        "outcome     {}\nsent        {}\nfirst run   {}\nended       {}\n",
                        done.outcome.as_str(),
                        known(done.sent_at_ms),
                        known(done.first_delivered_at_ms),
                        time_text(done.finished_at_ms)
                    ));
                }
                if let Some(trace) = &m.traceparent {
                    t.push_str(&format!("traceparent {trace}\n"));
                }
                for e in &m.errors {
                    t.push_str(&format!(
                        "error       attempt {} at {}: {}\n",
                        e.attempt,
                        time_text(e.at_ms),
                        e.error
                    ));
                }
                t.push_str(&format!("payload     {payload}"));
                t
            })
        }
        AdminCommand::Cancel { common, queue, id } => {
            let q = common.connect().await?.queue(&queue)?;
            match q.cancel(&id).await? {
                CancelOutcome::Cancelled(state) => {
                    let out = json!({ "cancelled": true, "state": state.as_str() });
                    print(&common, &out, || format!("cancelled {id} (it was {state})"))
                }
                CancelOutcome::NotCancelled(state) => bail!("{id} is {state}: not cancelled"),
                CancelOutcome::NotFound => bail!("message {id} not found in {queue}"),
                _ => bail!("unexpected outcome"),
            }
        }
        AdminCommand::Reschedule {
            common,
            queue,
            id,
            delay,
            at,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            let due_ms = q.reschedule(&id, schedule(delay, at)?).await?;
            let out = json!({ "id": id, "due_ms": due_ms });
            print(&common, &out, || format!("{id}  due {}", time_text(due_ms)))
        }
        AdminCommand::Stats { common, queue } => {
            let dq = common.connect().await?;
            let names = match queue {
                Some(q) => vec![q],
                None => dq.queues().await?.iter().map(|q| q.to_string()).collect(),
            };
            let mut rows = Vec::new();
            for name in names {
                let q = dq.queue(&name)?;
                rows.push((name.clone(), q.stats().await?, q.partitions().await?));
            }
            let out = Value::Array(rows.iter().map(|(n, s, p)| stats_json(n, s, *p)).collect());
            print(&common, &out, || stats_table(&rows))
        }
        AdminCommand::Queues { common } => {
            let dq = common.connect().await?;
            let names: Vec<String> = dq.queues().await?.iter().map(|q| q.to_string()).collect();
            let out = json!(names);
            print(&common, &out, || names.join("\n"))
        }
        AdminCommand::CreateQueue {
            common,
            queue,
            partitions,
        } => {
            common
                .connect()
                .await?
                .create_queue(&queue, partitions)
                .await?;
            let out = json!({ "queue": queue, "partitions": partitions });
            print(&common, &out, || {
                format!("{queue}: {partitions} partition(s)")
            })
        }
        AdminCommand::DeleteQueue {
            common,
            queue,
            force,
        } => {
            let dq = common.connect().await?;
            let q = dq.queue(&queue)?;
            let deleted = delayq_server::deletion::delete_queue(&dq, &q, force).await?;
            if !deleted.existed {
                bail!("no queue {queue}");
            }
            let out = serde_json::to_value(DeletedOut::new(&queue, &deleted))?;
            print(&common, &out, || {
                let raced = match deleted.raced {
                    true => "; a message sent meanwhile started it again",
                    false => "",
                };
                format!(
                    "{queue}: deleted ({} messages, {} keys){raced}",
                    deleted.messages, deleted.keys
                )
            })
        }
        AdminCommand::Pause { common, queue } => {
            common.connect().await?.queue(&queue)?.pause().await?;
            print(&common, &json!({ "queue": queue, "paused": true }), || {
                format!("{queue}: paused")
            })
        }
        AdminCommand::Resume { common, queue } => {
            common.connect().await?.queue(&queue)?.resume().await?;
            print(&common, &json!({ "queue": queue, "paused": false }), || {
                format!("{queue}: resumed")
            })
        }
        AdminCommand::Configure(args) => super::configure::run(args).await,
        AdminCommand::Events(args) => super::events::run(args).await,
        AdminCommand::Dead(dead) => run_dead(dead).await,
        AdminCommand::Schedule(command) => super::schedule::run(command).await,
        AdminCommand::Push(command) => super::push::run(command).await,
        AdminCommand::Webhooks(command) => super::webhooks::run(command).await,
        AdminCommand::Format(command) => super::format::run(command).await,
        AdminCommand::Groups(command) => super::groups::run(command).await,
    }
}

async fn run_dead(command: DeadCommand) -> anyhow::Result<()> {
    match command {
        DeadCommand::List {
            common,
            queue,
            offset,
            limit,
        } => {
            let q = common.connect().await?.queue(&queue)?;
            let list = q.dead_letters().list(offset, limit).await?;
            let out = Value::Array(
                list.iter()
                    .map(|d| {
                        json!({
                            "id": d.id, "died_at_ms": d.died_at_ms, "attempts": d.attempts,
                            "last_error": d.last_error, "payload": payload_text(&d.payload, d.kind),
                        })
                    })
                    .collect(),
            );
            print(&common, &out, || {
                let mut t = format!(
                    "{:<36} {:<24} {:>8}  {}",
                    "ID", "DIED", "ATTEMPTS", "LAST ERROR"
                );
                for d in &list {
                    t.push_str(&format!(
                        "\n{:<36} {:<24} {:>8}  {}",
                        d.id,
                        time_text(d.died_at_ms),
                        d.attempts,
                        d.last_error.as_deref().unwrap_or("-")
                    ));
                }
                t
            })
        }
        DeadCommand::Requeue(target) => {
            let count = dead_one_or_all(&target, Action::Requeue).await?;
            print(&target.common, &json!({ "requeued": count }), || {
                format!("requeued {count}")
            })
        }
        DeadCommand::Purge(target) => {
            let count = dead_one_or_all(&target, Action::Purge).await?;
            print(&target.common, &json!({ "purged": count }), || {
                format!("purged {count}")
            })
        }
    }
}

#[derive(Clone, Copy)]
enum Action {
    Requeue,
    Purge,
}

/// Requeues or purges one dead letter by id (an error if there is none) or all of them.
async fn dead_one_or_all(target: &DeadTarget, action: Action) -> anyhow::Result<u64> {
    let (queue, id) = (&target.queue, target.id.clone());
    let q = target.common.connect().await?.queue(queue)?;
    let dead = q.dead_letters();
    Ok(match (id, target.all, action) {
        (Some(id), false, _) => {
            let found = match action {
                Action::Requeue => dead.requeue(&id).await?,
                Action::Purge => dead.purge(&id).await?,
            };
            if !found {
                bail!("no dead letter {id} in {queue}");
            }
            1
        }
        (_, _, Action::Requeue) => dead.requeue_all().await?,
        (_, _, Action::Purge) => dead.purge_all().await?,
    })
}

fn schedule(
    delay: Option<Duration>,
    at: Option<std::time::SystemTime>,
) -> anyhow::Result<Schedule> {
    Ok(match (delay, at) {
        (Some(d), _) => Schedule::After(d),
        (None, Some(t)) => Schedule::At(unix_ms(t)),
        (None, None) => Schedule::Now,
    })
}

/// `t` as ms since the Unix epoch (0 for a time before it: a time in the past either way).
fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn stats_table(rows: &[(String, Stats, u16)]) -> String {
    let mut t = format!(
        "{:<32} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}  {}",
        "QUEUE",
        "DELAYED",
        "READY",
        "IN FLIGHT",
        "OVERDUE",
        "DEAD",
        "LAG MS",
        "PARTITIONS",
        "STATE"
    );
    for (name, s, partitions) in rows {
        let state = if s.paused { "paused" } else { "active" };
        t.push_str(&format!(
            "\n{:<32} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}  {}",
            name,
            s.delayed,
            s.ready,
            s.in_flight,
            s.overdue,
            s.dead,
            s.oldest_ready_lag_ms,
            partitions,
            state
        ));
    }
    t
}
