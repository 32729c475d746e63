//! The commands on messages: `send`, `get`, `cancel` (one, many, or a state's or a search's
//! messages), `reschedule` and `list` (a state's messages a page at a time, or a search).

use std::time::Duration;

use anyhow::bail;
use axum::http::Method;
use delayq_server::api::upsert_args::{IfInFlightArg, OnDuplicateArg};
use serde_json::{json, Value};

use super::api_client::{query, segment};
use super::common::{
    backoff_json, ms, payload_field, payload_text, print, text, time_of, unix_ms, Common,
};

/// `delayq send`.
#[derive(clap::Args)]
pub struct SendArgs {
    #[command(flatten)]
    pub common: Common,
    pub queue: String,
    /// The payload (text; with --json-payload, a JSON document).
    pub payload: String,
    /// Due after this long (e.g. 15m, 3days).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at")]
    pub delay: Option<Duration>,
    /// Due at this time (RFC 3339, e.g. 2026-12-01T09:00:00Z).
    #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
    pub at: Option<std::time::SystemTime>,
    /// Your own id (idempotent send; cancel by it later).
    #[arg(long)]
    pub id: Option<String>,
    /// Deliveries before the message goes to the dead letters.
    #[arg(long)]
    pub max_attempts: Option<u16>,
    /// Retry policy: fixed:30s, exponential:1s..10m, linear:30s..10m or list:30s,2m,10m
    /// (the last delay repeats).
    #[arg(long)]
    pub backoff: Option<String>,
    /// Shorten each retry delay at random by up to this percentage.
    #[arg(long, requires = "backoff")]
    pub jitter: Option<u8>,
    /// 0 (lowest) to 9 (highest), default 5: due messages of higher priority go first.
    #[arg(long)]
    pub priority: Option<u8>,
    /// Its group (a tenant, a customer, an order): groups take turns, and the queue's
    /// group concurrency bounds each one's messages in flight.
    #[arg(long)]
    pub group: Option<String>,
    /// Never delivered more than this long after it is due (e.g. 15m): later, it expires.
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "expires_at")]
    pub ttl: Option<std::time::Duration>,
    /// Never delivered at or after this time (RFC 3339).
    #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
    pub expires_at: Option<std::time::SystemTime>,
    /// Longest a worker may spend on it (e.g. 90s), in place of the worker's own limit.
    #[arg(long, value_parser = humantime::parse_duration)]
    pub handler_timeout: Option<std::time::Duration>,
    /// With --id, when a message with that id exists: keep it (a duplicate), replace
    /// it, or debounce it (with --max-wait).
    #[arg(long, value_enum, requires = "id")]
    pub on_duplicate: Option<OnDuplicateArg>,
    /// A debounce is never due later than this after the first send it replaced in
    /// turn (e.g. 30s).
    #[arg(long, value_parser = humantime::parse_duration)]
    pub max_wait: Option<std::time::Duration>,
    /// A replace or debounce of a message in flight: send a second message (the one in
    /// flight is superseded) or refuse.
    #[arg(long, value_enum)]
    pub if_in_flight: Option<IfInFlightArg>,
    /// The payload is JSON: consumers get it back as JSON.
    #[arg(long)]
    pub json_payload: bool,
}

/// `delayq cancel`.
#[derive(clap::Args)]
pub struct CancelArgs {
    #[command(flatten)]
    common: Common,
    queue: String,
    /// The messages' ids.
    #[arg(required_unless_present = "state", conflicts_with = "state")]
    ids: Vec<String>,
    /// Every message in this state: delayed or ready.
    #[arg(long, value_parser = ["delayed", "ready"])]
    state: Option<String>,
    /// With --state: only those whose payload or id contains this text.
    #[arg(long, requires = "state")]
    contains: Option<String>,
    /// With --state: list what would be cancelled, cancel nothing.
    #[arg(long, requires = "state")]
    dry_run: bool,
}

/// `delayq list`.
#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    common: Common,
    queue: String,
    /// The state: delayed, ready, in_flight, dead or completed.
    #[arg(long, value_parser = ["delayed", "ready", "in_flight", "dead", "completed"])]
    state: String,
    /// Go on from here: the `next` of the page before.
    #[arg(long)]
    cursor: Option<String>,
    /// Messages per page (1-1000; default 50); with --contains, messages looked at per
    /// partition in this step (default 500).
    #[arg(long)]
    limit: Option<usize>,
    /// Search: only messages whose payload or id contains this text.
    #[arg(long)]
    contains: Option<String>,
}

/// The path of message `id` of `queue`.
fn message_path(queue: &str, id: &str) -> String {
    format!("/v1/queues/{}/messages/{}", segment(queue), segment(id))
}

pub async fn send(args: SendArgs) -> anyhow::Result<()> {
    let mut body = json!({});
    payload_field(&mut body, &args.payload, args.json_payload)?;
    if let Some(d) = args.delay {
        body["delay"] = json!(ms(d));
    }
    if let Some(at) = args.at {
        body["deliver_at"] = json!(unix_ms(at));
    }
    if let Some(id) = &args.id {
        body["id"] = json!(id);
    }
    if let Some(n) = args.max_attempts {
        body["max_attempts"] = json!(n);
    }
    if let Some(spec) = &args.backoff {
        body["backoff"] = backoff_json(spec, args.jitter)?;
    }
    if let Some(p) = args.priority {
        body["priority"] = json!(p);
    }
    if let Some(group) = &args.group {
        body["group"] = json!(group);
    }
    if let Some(ttl) = args.ttl {
        body["ttl"] = json!(ms(ttl));
    }
    if let Some(at) = args.expires_at {
        body["expires_at"] = json!(unix_ms(at));
    }
    if let Some(timeout) = args.handler_timeout {
        body["handler_timeout"] = json!(ms(timeout));
    }
    if let Some(on) = args.on_duplicate {
        body["on_duplicate"] = json!(enum_name(on));
    }
    if let Some(wait) = args.max_wait {
        body["max_wait"] = json!(ms(wait));
    }
    if let Some(what) = args.if_in_flight {
        body["if_in_flight"] = json!(enum_name(what));
    }
    let path = format!("/v1/queues/{}/messages", segment(&args.queue));
    let sent = args
        .common
        .api()
        .await?
        .call(Method::POST, &path, Some(&body))
        .await?;
    print(&args.common, &sent, || {
        let note = match (sent["duplicate"].as_bool(), sent["replaced"].as_str()) {
            (Some(true), _) => " (duplicate: already there)".to_owned(),
            (_, Some(state)) => format!(" (replaced one {})", state.replace('_', " ")),
            _ => String::new(),
        };
        format!(
            "{}  due {}{note}",
            text(&sent["id"]),
            time_of(&sent["due_ms"])
        )
    })
}

/// A clap value's name as the API spells it (the same words).
fn enum_name(value: impl clap::ValueEnum) -> String {
    value
        .to_possible_value()
        .map(|v| v.get_name().replace('-', "_"))
        .unwrap_or_default()
}

pub async fn get(common: Common, queue: String, id: String) -> anyhow::Result<()> {
    let m = common.api().await?.get(&message_path(&queue, &id)).await?;
    print(&common, &m, || {
        let mut t = format!(
            "id          {}\nstate       {}\ndue         {}\nattempts    {} of {}\npriority    {}\n",
            text(&m["id"]),
            text(&m["state"]).replace('_', " "),
            time_of(&m["due_ms"]),
            m["attempts"],
            m["max_attempts"],
            m["priority"]
        );
        if let Some(group) = m["group"].as_str() {
            t.push_str(&format!("group       {group}\n"));
        }
        if let Some(outcome) = m["outcome"].as_str() {
            let known = |v: &Value| match v.is_u64() {
                true => time_of(v),
                false => "unknown".into(),
            };
            t.push_str(&format!(
                "outcome     {outcome}\nsent        {}\nfirst run   {}\nended       {}\n",
                known(&m["sent_at_ms"]),
                known(&m["first_delivered_at_ms"]),
                time_of(&m["finished_at_ms"])
            ));
        }
        if let Some(trace) = m["traceparent"].as_str() {
            t.push_str(&format!("traceparent {trace}\n"));
        }
        for e in m["errors"].as_array().into_iter().flatten() {
            t.push_str(&format!(
                "error       attempt {} at {}: {}\n",
                e["attempt"],
                time_of(&e["at_ms"]),
                text(&e["error"])
            ));
        }
        match m["payload_kept"].as_bool() {
            Some(false) => t.push_str("payload     not kept (a final record)"),
            _ => t.push_str(&format!("payload     {}", payload_text(&m))),
        }
        t
    })
}

pub async fn reschedule(
    common: Common,
    queue: String,
    id: String,
    delay: Option<Duration>,
    at: Option<std::time::SystemTime>,
) -> anyhow::Result<()> {
    let body = match (delay, at) {
        (Some(d), _) => json!({ "delay": ms(d) }),
        (None, Some(t)) => json!({ "deliver_at": unix_ms(t) }),
        (None, None) => bail!("give --delay or --at"),
    };
    let path = format!("{}/reschedule", message_path(&queue, &id));
    let out = common
        .api()
        .await?
        .call(Method::POST, &path, Some(&body))
        .await?;
    print(&common, &out, || {
        format!("{}  due {}", text(&out["id"]), time_of(&out["due_ms"]))
    })
}

pub async fn list(args: ListArgs) -> anyhow::Result<()> {
    let path = format!(
        "/v1/queues/{}/messages{}",
        segment(&args.queue),
        query(&[
            ("state", Some(args.state.clone())),
            ("cursor", args.cursor.clone()),
            ("limit", args.limit.map(|n| n.to_string())),
            ("contains", args.contains.clone()),
        ])
    );
    let page = args.common.api().await?.get(&path).await?;
    print(&args.common, &page, || {
        let mut t = summaries_table(&page["messages"]);
        if args.contains.is_some() {
            t.push_str(&format!("\n({} looked at in this step)", page["scanned"]));
        }
        if let Some(next) = page["next"].as_str() {
            t.push_str(&format!("\nnext: --cursor {next}"));
        }
        t
    })
}

/// Messages as a list shows them.
fn summaries_table(messages: &Value) -> String {
    let mut t = format!(
        "{:<36} {:<10} {:<24} {:>8}  {}",
        "ID", "STATE", "DUE", "ATTEMPTS", "PAYLOAD"
    );
    for m in messages.as_array().into_iter().flatten() {
        t.push_str(&format!(
            "\n{:<36} {:<10} {:<24} {:>8}  {}",
            text(&m["id"]),
            text(&m["state"]),
            time_of(&m["due_ms"]),
            format!("{}/{}", m["attempts"], m["max_attempts"]),
            preview(m)
        ));
    }
    t
}

/// A list entry's payload preview, one line.
fn preview(m: &Value) -> String {
    let shown = match m.get("payload_preview") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "-".into(),
    };
    shown.replace(['\n', '\r'], " ")
}

pub async fn cancel(args: CancelArgs) -> anyhow::Result<()> {
    let api = args.common.api().await?;
    let path = format!("/v1/queues/{}/cancel", segment(&args.queue));
    let Some(state) = &args.state else {
        if let [id] = args.ids.as_slice() {
            // One id: the API's own answer for one, and its error when it cannot.
            let out = api
                .call(Method::DELETE, &message_path(&args.queue, id), None)
                .await?;
            return print(&args.common, &out, || {
                format!("cancelled {id} (it was {})", text(&out["state"]))
            });
        }
        let mut total = json!({ "cancelled": 0, "results": [] });
        for ids in args.ids.chunks(CANCEL_BATCH) {
            let out = api
                .call(Method::POST, &path, Some(&json!({ "ids": ids })))
                .await?;
            merge(&mut total, out);
        }
        return print(&args.common, &total, || results_text(&total));
    };
    // Every message of the state (or of a search): a page listed, then cancelled, until
    // the list ends. A cancelled message leaves the list; the cursor goes on after it.
    let mut total = json!({ "cancelled": 0, "results": [] });
    let mut cursor: Option<String> = None;
    loop {
        let list = format!(
            "/v1/queues/{}/messages{}",
            segment(&args.queue),
            query(&[
                ("state", Some(state.clone())),
                ("cursor", cursor.clone()),
                ("limit", Some(CANCEL_BATCH.to_string())),
                ("contains", args.contains.clone()),
            ])
        );
        let page = api.get(&list).await?;
        let ids: Vec<&str> = page["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["id"].as_str())
            .collect();
        if args.dry_run {
            for id in &ids {
                push_result(
                    &mut total,
                    json!({ "id": id, "outcome": "would_cancel", "state": state }),
                );
            }
        } else if !ids.is_empty() {
            let out = api
                .call(Method::POST, &path, Some(&json!({ "ids": ids })))
                .await?;
            merge(&mut total, out);
        }
        match page["next"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
    }
    print(&args.common, &total, || results_text(&total))
}

/// Ids cancelled per request (the API's default batch limit).
const CANCEL_BATCH: usize = 1000;

fn push_result(total: &mut Value, result: Value) {
    if let Some(results) = total["results"].as_array_mut() {
        results.push(result);
    }
}

/// Adds one answer of `POST .../cancel` to `total`.
fn merge(total: &mut Value, out: Value) {
    let sum = total["cancelled"].as_u64().unwrap_or(0) + out["cancelled"].as_u64().unwrap_or(0);
    total["cancelled"] = json!(sum);
    for result in out["results"].as_array().into_iter().flatten() {
        push_result(total, result.clone());
    }
}

/// What a bulk cancel did, a line per message that was not cancelled, then the count.
fn results_text(total: &Value) -> String {
    let results = total["results"].as_array().cloned().unwrap_or_default();
    let mut t = String::new();
    let mut would = 0;
    for r in &results {
        match r["outcome"].as_str() {
            Some("cancelled") => {}
            Some("would_cancel") => {
                would += 1;
                t.push_str(&format!("would cancel {}\n", text(&r["id"])));
            }
            Some("not_found") => t.push_str(&format!("{}: not found\n", text(&r["id"]))),
            _ => t.push_str(&format!(
                "{}: {}, not cancelled\n",
                text(&r["id"]),
                text(&r["state"]).replace('_', " ")
            )),
        }
    }
    match would {
        0 => t.push_str(&format!(
            "cancelled {} of {}",
            total["cancelled"],
            results.len()
        )),
        n => t.push_str(&format!(
            "{n} would be cancelled (dry run: nothing cancelled)"
        )),
    }
    t
}
