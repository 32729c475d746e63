//! `delayq audit`: the audit log, newest first (`GET /v1/audit`): when, who, through what,
//! which action, queue and ids, from where, and the outcome.

use super::api_client::query;
use super::common::{print, text, time_text, Common};

#[derive(clap::Args)]
pub struct AuditArgs {
    #[command(flatten)]
    common: Common,
    /// Entries of this queue only.
    #[arg(long)]
    queue: Option<String>,
    /// Most entries (1 to 1000).
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// Entries older than this one (the `next:` line of the page before).
    #[arg(long)]
    before: Option<String>,
}

pub async fn run(args: AuditArgs) -> anyhow::Result<()> {
    let path = format!(
        "/v1/audit{}",
        query(&[
            ("queue", args.queue),
            ("limit", Some(args.limit.to_string())),
            ("before", args.before),
        ])
    );
    let out = args.common.api().await?.get(&path).await?;
    print(&args.common, &out, || table(&out))
}

/// A row per entry; the next page's `--before` last.
fn table(page: &serde_json::Value) -> String {
    let mut t = format!(
        "{:<24} {:<20} {:<9} {:<24} {:<16} {:<9} {:<18} IDS",
        "WHEN", "WHO", "VIA", "ACTION", "QUEUE", "OUTCOME", "FROM"
    );
    for e in page["entries"].as_array().into_iter().flatten() {
        // The entry's id is `<unix ms>-<n>`.
        let when = text(&e["id"])
            .split('-')
            .next()
            .and_then(|ms| ms.parse().ok())
            .map_or("-".to_owned(), time_text);
        let ids: Vec<String> = e["ids"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        let outcome = format!("{} {}", text(&e["outcome"]), e["status"]);
        t.push_str(&format!(
            "\n{when:<24} {:<20} {:<9} {:<24} {:<16} {outcome:<9} {:<18} {}",
            text(&e["actor"]),
            text(&e["via"]),
            text(&e["action"]),
            text(&e["queue"]),
            text(&e["from"]),
            ids.join(",")
        ));
    }
    if let Some(next) = page["next"].as_str() {
        t.push_str(&format!("\nnext: --before {next}"));
    }
    t
}
