//! `delayq webhooks ...`: add, list and remove the URLs a queue's events are sent to. Every
//! `delayq serve` then calls them (one server per queue at a time), checking each request's
//! address against its `--push-allow` as it goes.

use anyhow::bail;
use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::{is_code, segment, ApiClient};
use super::common::{print, text, Common};

/// Webhook commands.
#[derive(clap::Subcommand)]
pub enum WebhooksCommand {
    /// Send a queue's events to URL (in place of its kinds, if it is there already), from
    /// now on; turns the queue's events on.
    Add {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
        /// Only events of these kinds (comma-separated; default: every kind).
        #[arg(long, value_delimiter = ',')]
        kind: Vec<String>,
    },
    /// Show a queue's webhooks and the key their requests are signed with.
    List {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Stop sending a queue's events to URL.
    Remove {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
    },
}

pub async fn run(command: WebhooksCommand) -> anyhow::Result<()> {
    match command {
        WebhooksCommand::Add {
            common,
            queue,
            url,
            kind,
        } => {
            let api = common.api().await?;
            let mut hooks = current(&api, &queue).await?;
            hooks.retain(|h| h["url"].as_str() != Some(url.as_str()));
            hooks.push(json!({ "url": url, "kinds": kind }));
            let body = json!({ "webhooks": hooks });
            let out = api.call(Method::PUT, &path(&queue), Some(&body)).await?;
            show(&common, &out)
        }
        WebhooksCommand::List { common, queue } => {
            let out = common.api().await?.get(&path(&queue)).await?;
            show(&common, &out)
        }
        WebhooksCommand::Remove { common, queue, url } => {
            let api = common.api().await?;
            let mut hooks = current(&api, &queue).await?;
            let before = hooks.len();
            hooks.retain(|h| h["url"].as_str() != Some(url.as_str()));
            if hooks.len() == before {
                bail!("{queue} has no webhook {url}");
            }
            if hooks.is_empty() {
                api.call(Method::DELETE, &path(&queue), None).await?;
                let out = json!({ "webhooks": [], "signing_keys": [] });
                return show(&common, &out);
            }
            let body = json!({ "webhooks": hooks });
            let out = api.call(Method::PUT, &path(&queue), Some(&body)).await?;
            show(&common, &out)
        }
    }
}

fn path(queue: &str) -> String {
    format!("/v1/queues/{}/webhooks", segment(queue))
}

/// The queue's webhooks now (none: an empty list).
async fn current(api: &ApiClient, queue: &str) -> anyhow::Result<Vec<Value>> {
    match api.get(&path(queue)).await {
        Ok(out) => Ok(out["webhooks"].as_array().cloned().unwrap_or_default()),
        Err(e) if is_code(&e, "not_found") => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

fn show(common: &Common, out: &Value) -> anyhow::Result<()> {
    print(common, out, || {
        let mut lines: Vec<String> = out["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| {
                let kinds: Vec<String> = h["kinds"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect();
                let kinds = match kinds.is_empty() {
                    true => "every kind".to_owned(),
                    false => kinds.join(","),
                };
                format!("{}  {kinds}", text(&h["url"]))
            })
            .collect();
        if let Some(key) = out["signing_keys"][0].as_str() {
            lines.push(format!("signing key: {key}"));
        }
        lines.join("\n")
    })
}
