//! A library worker process: delayq's worker runtime (concurrency, lease heartbeats, graceful
//! shutdown on SIGTERM) with a handler that records its hold on each delivery. The runtime's
//! warnings about deliveries it could not settle are recorded too: they explain duplicates.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::Delivery;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

use crate::history::{now_us, Event, Outcome, Payload, Recorder};
use crate::holding::{Holding, Started};
use crate::plan;

/// Settings of one worker process.
#[derive(clap::Args, Debug)]
pub struct WorkArgs {
    /// Redis URL (with `--cluster`: the cluster's node URLs, comma-separated).
    #[arg(long)]
    redis_url: String,
    /// `--redis-url` lists the nodes of a Redis Cluster.
    #[arg(long)]
    cluster: bool,
    /// History file.
    #[arg(long)]
    out: PathBuf,
    /// Handlers at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Clients of Redis, each with its own connections and a worker of its own, sharing
    /// `--concurrency` (the reconnect-storm scenario's crowd: 1,000).
    #[arg(long, default_value_t = 1)]
    clients: usize,
}

/// Runs the worker until SIGTERM.
pub async fn run(args: WorkArgs) -> Result<(), String> {
    let recorder =
        Arc::new(Recorder::create(&args.out).map_err(|e| format!("{:?}: {e}", args.out))?);
    tracing_subscriber::registry()
        .with(Warnings(recorder.clone()))
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .with(tracing_subscriber::EnvFilter::new("warn"))
        .init();
    let clients = args.clients.max(1);
    let concurrency = (args.concurrency / clients).max(1);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..clients {
        let dq = crate::producer::connect_to(&args.redis_url, args.cluster, Duration::from_secs(1))
            .await?;
        let queue = dq.queue(plan::QUEUE).map_err(|e| e.to_string())?;
        let recorder = recorder.clone();
        let worker = WorkerBuilder::new(queue)
            .concurrency(concurrency)
            .lease(plan::LEASE)
            .batch_size(8.min(concurrency))
            .shutdown_grace(Duration::from_secs(3))
            .build(move |delivery| handle(recorder.clone(), delivery))
            .map_err(|e| e.to_string())?;
        let mut stopped = stopped.clone();
        workers.spawn(async move {
            let stop = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            worker
                .run(stop)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        });
    }
    crate::shutdown::sigterm().await;
    let _ = stop.send(true);
    while let Some(done) = workers.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    Ok(())
}

async fn handle(recorder: Arc<Recorder>, delivery: Delivery) -> Result<(), String> {
    let Some(payload) = Payload::parse(&delivery.payload) else {
        return Err(format!("not a payload of this run: {:?}", delivery.payload));
    };
    let hold = Holding::start(
        recorder,
        Started {
            id: &delivery.id,
            token: format!("{:012x}", delivery.token()),
            attempt: delivery.attempt,
            due_ms: delivery.due_ms,
            payload,
            seq: crate::holding::seq_of_receipt(&delivery.receipt().to_string()),
            lease_deadline_ms: delivery.lease_deadline_ms,
        },
    );
    if plan::fails(payload.n, delivery.attempt) {
        hold.finish(Outcome::Failed);
        return Err("failing on purpose".into());
    }
    tokio::time::sleep(plan::work_time(payload.n)).await;
    hold.finish(Outcome::Ok);
    Ok(())
}

/// Records every warning the runtime logs, with the delivery id when it names one.
struct Warnings(Arc<Recorder>);

impl<S: tracing::Subscriber> Layer<S> for Warnings {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        if *event.metadata().level() > tracing::Level::WARN {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        let result = match fields.error {
            Some(error) => format!("{}: {error}", fields.message),
            None => fields.message,
        };
        self.0.record(&Event::Settle {
            pid: std::process::id(),
            id: fields.id,
            token: None,
            result,
            at_us: now_us(),
        });
    }
}

#[derive(Default)]
struct Fields {
    message: String,
    id: Option<String>,
    error: Option<String>,
}

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let text = format!("{value:?}");
        match field.name() {
            "message" => self.message = text,
            "id" => self.id = Some(text),
            "error" => self.error = Some(text),
            _ => {}
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        match field.name() {
            "message" => self.message = value.to_owned(),
            "id" => self.id = Some(value.to_owned()),
            "error" => self.error = Some(value.to_owned()),
            _ => {}
        }
    }
}
