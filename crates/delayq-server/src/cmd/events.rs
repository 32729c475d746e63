//! `delayq events QUEUE`: a queue's events (one per change of a message's state, while the
//! queue records them: `delayq configure QUEUE --events`), a line each, or JSON lines with
//! `--json`. Without `--follow` it prints those kept from `--from` (the oldest by default) and
//! ends; with it, it goes on printing as they happen (from now by default) until stopped.
//! Each JSON line carries its `cursor`, which `--from` takes to go on after it. The events
//! come in pages of `GET /v1/queues/{queue}/events` (long-polled when following), each
//! event printed as the API gives it.

use serde_json::Value;

use super::api_client::{query, segment};
use super::common::{text, time_of, Common};

/// Events read at a time.
const READ: usize = 500;

/// How long one page waits for events when following (within the server's longest wait).
const FOLLOW_WAIT_MS: u64 = 20_000;

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
    let api = args.common.api().await?;
    let mut from = args
        .from
        .clone()
        .unwrap_or_else(|| if args.follow { "now" } else { "oldest" }.to_owned());
    let kinds = (!args.kind.is_empty()).then(|| args.kind.join(","));
    let wait = if args.follow { FOLLOW_WAIT_MS } else { 0 };
    loop {
        let path = format!(
            "/v1/queues/{}/events{}",
            segment(&args.queue),
            query(&[
                ("from", Some(from.clone())),
                ("kind", kinds.clone()),
                ("id", args.id.clone()),
                ("limit", Some(READ.to_string())),
                ("wait_ms", Some(wait.to_string())),
            ])
        );
        let page = tokio::select! {
            page = api.get(&path) => page?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let events = page["events"].as_array().cloned().unwrap_or_default();
        for event in &events {
            println!("{}", line(&args.common, event));
        }
        let next = text(&page["cursor"]);
        // Without --follow: done at the end, where a page finds nothing and does not move
        // on (a filtered page may find nothing in what it looked at, and move on).
        if !args.follow && events.is_empty() && next == from {
            return Ok(());
        }
        from = next;
    }
}

/// An event as one line: the API's JSON object with `--json`, else its time, kind, id and
/// details.
fn line(common: &Common, event: &Value) -> String {
    if common.json() {
        return event.to_string();
    }
    let mut out = format!(
        "{}  {:<11}  {}",
        time_of(&event["at_ms"]),
        text(&event["kind"]),
        text(&event["id"])
    );
    if let Some(n) = event["attempt"].as_u64() {
        out.push_str(&format!("  attempt {n}"));
    }
    if event["due_ms"].is_u64() {
        out.push_str(&format!("  due {}", time_of(&event["due_ms"])));
    }
    if let Some(detail) = event["detail"].as_str() {
        out.push_str(&format!("  ({detail})"));
    }
    if let Some(error) = event["error"].as_str() {
        out.push_str(&format!("  error: {error}"));
    }
    out
}
