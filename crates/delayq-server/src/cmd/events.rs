//! `delayq events QUEUE`: a queue's events (one per change of a message's state, while the
//! queue records them: `delayq configure QUEUE --events`), a line each, or JSON lines with
//! `--json`. Without `--follow` it prints those kept from `--from` (the oldest by default) and
//! ends; with it, it goes on printing as they happen (from now by default) until stopped.
//! Each JSON line carries its `cursor`, which `--from` takes to go on after it.

use delayq::{Event, EventFilter, EventKind};
use delayq_server::api::events::{start_of, EventOut};

use super::common::{time_text, Common};

/// Events read at a time.
const READ: usize = 500;

#[derive(clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    common: Common,
    queue: String,
    /// Where to start: oldest, now, or a cursor an event carried (default: oldest, or now
    /// with --follow).
    #[arg(long)]
    from: Option<String>,
    /// Only events of these kinds (comma-separated: sent, delivered, acked, retry,
    /// released, dead, expired, superseded, cancelled, rescheduled, requeued, purged).
    #[arg(long, value_delimiter = ',')]
    kind: Vec<String>,
    /// Only events of the message with this id.
    #[arg(long)]
    id: Option<String>,
    /// Keep printing events as they happen, until stopped (Ctrl-C).
    #[arg(long)]
    follow: bool,
}

pub async fn run(args: EventsArgs) -> anyhow::Result<()> {
    let mut filter = EventFilter::new();
    for name in &args.kind {
        filter = filter.kind(EventKind::parse(name)?);
    }
    if let Some(id) = &args.id {
        filter = filter.id(id.clone());
    }
    let from = args
        .from
        .as_deref()
        .or(Some(if args.follow { "now" } else { "oldest" }));
    let start = start_of(from).map_err(|e| anyhow::anyhow!("--from: {}", e.message()))?;
    let q = args.common.connect().await?.queue(&args.queue)?;
    let mut reader = q.events(start, filter).await?;
    loop {
        let wait = if args.follow {
            None
        } else {
            Some(std::time::Duration::ZERO)
        };
        let events = tokio::select! {
            read = reader.next(READ, wait) => read?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        if events.is_empty() && !args.follow {
            return Ok(());
        }
        for event in events {
            println!("{}", line(&args.common, event));
        }
    }
}

/// An event as one line: a JSON object with `--json`, else its time, kind, id and details.
fn line(common: &Common, event: Event) -> String {
    if common.json() {
        return serde_json::to_string(&EventOut::from(event)).unwrap_or_default();
    }
    let mut out = format!(
        "{}  {:<11}  {}",
        time_text(event.at_ms),
        event.kind,
        event.id
    );
    if let Some(n) = event.attempt {
        out.push_str(&format!("  attempt {n}"));
    }
    if let Some(due) = event.due_ms {
        out.push_str(&format!("  due {}", time_text(due)));
    }
    if let Some(detail) = &event.detail {
        out.push_str(&format!("  ({detail})"));
    }
    if let Some(error) = &event.error {
        out.push_str(&format!("  error: {error}"));
    }
    out
}
