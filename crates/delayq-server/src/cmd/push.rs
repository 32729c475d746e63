//! `delayq push ...`: set, show and remove a queue's push target. Every `delayq serve` then
//! pushes the queue's messages to it (a target whose address the server may not reach,
//! `--push-allow`, is logged there and not pushed to).

use std::time::Duration;

use anyhow::bail;
use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::segment;
use super::common::{ms, print, text, Common};

/// Push target commands.
#[derive(clap::Subcommand)]
pub enum PushCommand {
    /// Push a queue's messages to URL (replacing its target, if any).
    Set {
        #[command(flatten)]
        common: Common,
        queue: String,
        url: String,
        /// How long one request may take.
        #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
        timeout: Duration,
        /// Most requests at once, per server.
        #[arg(long, default_value_t = 16)]
        concurrency: usize,
        /// An extra header, NAME:VALUE (repeatable).
        #[arg(long = "header")]
        headers: Vec<String>,
        /// Called once with each message that becomes a dead letter.
        #[arg(long)]
        failure_callback: Option<String>,
        /// Signing keys, current first (default: keep the target's, or make one).
        #[arg(long = "signing-key")]
        signing_keys: Vec<String>,
        /// An origin (https://hooks.example.com) a message's own push URL may be on
        /// (repeatable; default: messages cannot bring a URL).
        #[arg(long = "allow-message-url")]
        allow_message_urls: Vec<String>,
    },
    /// Show a queue's push target.
    Get {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Remove a queue's push target: pull consumers get its messages again.
    Remove {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
}

pub async fn run(command: PushCommand) -> anyhow::Result<()> {
    match command {
        PushCommand::Set {
            common,
            queue,
            url,
            timeout,
            concurrency,
            headers,
            failure_callback,
            signing_keys,
            allow_message_urls,
        } => {
            let mut header_map = serde_json::Map::new();
            for h in headers {
                let Some((name, value)) = h.split_once(':') else {
                    bail!("--header {h:?}: give NAME:VALUE");
                };
                header_map.insert(name.trim().to_owned(), json!(value.trim()));
            }
            let mut body = json!({
                "url": url, "timeout": ms(timeout), "concurrency": concurrency,
                "headers": header_map, "allow_message_urls": allow_message_urls,
            });
            if let Some(callback) = failure_callback {
                body["failure_callback"] = json!(callback);
            }
            // None given: the API keeps the target's keys, or makes one.
            if !signing_keys.is_empty() {
                body["signing_keys"] = json!(signing_keys);
            }
            let api = common.api().await?;
            let target = api.call(Method::PUT, &path(&queue), Some(&body)).await?;
            show(&common, &target)
        }
        PushCommand::Get { common, queue } => {
            let target = common.api().await?.get(&path(&queue)).await?;
            show(&common, &target)
        }
        PushCommand::Remove { common, queue } => {
            common
                .api()
                .await?
                .call(Method::DELETE, &path(&queue), None)
                .await?;
            print(&common, &Value::Null, || format!("{queue}: pull again"))
        }
    }
}

fn path(queue: &str) -> String {
    format!("/v1/queues/{}/push", segment(queue))
}

fn show(common: &Common, target: &Value) -> anyhow::Result<()> {
    print(common, target, || {
        let origins: Vec<String> = target["allow_message_urls"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        format!(
            "{} {}  timeout {} ms, {} at once\nsigning key: {}\nmessage URLs allowed on: {}",
            text(&target["method"]),
            text(&target["url"]),
            target["timeout_ms"],
            target["concurrency"],
            text(&target["signing_keys"][0]),
            if origins.is_empty() {
                "none".to_owned()
            } else {
                origins.join(", ")
            }
        )
    })
}
