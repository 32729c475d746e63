//! The commands on queues as a whole: `stats`, `queues`, `create-queue`, `delete-queue`,
//! `pause`, `resume`, and `processes` (who uses this Redis, last seen when).

use axum::http::Method;
use serde_json::{json, Value};

use super::api_client::{query, segment};
use super::common::{print, text, Common};

fn queue_path(queue: &str) -> String {
    format!("/v1/queues/{}", segment(queue))
}

/// `delayq stats [QUEUE]`: the API's stats of one queue, or of every queue (`{"queues"}`).
pub async fn stats(common: Common, queue: Option<String>) -> anyhow::Result<()> {
    let api = common.api().await?;
    let out = match &queue {
        Some(q) => api.get(&queue_path(q)).await?,
        None => api.get("/v1/queues").await?,
    };
    let rows: Vec<Value> = match queue {
        Some(_) => vec![out.clone()],
        None => out["queues"].as_array().cloned().unwrap_or_default(),
    };
    print(&common, &out, || stats_table(&rows))
}

/// `delayq queues`: the names of the queues (from `GET /v1/queues`).
pub async fn queues(common: Common) -> anyhow::Result<()> {
    let out = common.api().await?.get("/v1/queues").await?;
    print(&common, &out, || {
        let names: Vec<String> = out["queues"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|q| text(&q["name"]))
            .collect();
        names.join("\n")
    })
}

pub async fn create(common: Common, queue: String, partitions: u16) -> anyhow::Result<()> {
    let body = json!({ "partitions": partitions });
    let out = common
        .api()
        .await?
        .call(Method::PUT, &queue_path(&queue), Some(&body))
        .await?;
    print(&common, &out, || {
        format!("{queue}: {} partition(s)", out["partitions"])
    })
}

pub async fn delete(common: Common, queue: String, force: bool) -> anyhow::Result<()> {
    let path = format!(
        "{}{}",
        queue_path(&queue),
        query(&[("force", force.then(|| "true".to_owned()))])
    );
    let out = common
        .api()
        .await?
        .call(Method::DELETE, &path, None)
        .await?;
    print(&common, &out, || {
        let raced = match out["raced"].as_bool() {
            Some(true) => "; a message sent meanwhile started it again",
            _ => "",
        };
        format!(
            "{queue}: deleted ({} messages, {} keys){raced}",
            out["messages"], out["keys"]
        )
    })
}

/// `delayq pause` (`paused`) or `delayq resume`.
pub async fn set_paused(common: Common, queue: String, paused: bool) -> anyhow::Result<()> {
    let action = if paused { "pause" } else { "resume" };
    let path = format!("{}/{action}", queue_path(&queue));
    let out = common.api().await?.call(Method::POST, &path, None).await?;
    print(&common, &out, || match paused {
        true => format!("{queue}: paused"),
        false => format!("{queue}: resumed"),
    })
}

pub async fn processes(common: Common) -> anyhow::Result<()> {
    let out = common.api().await?.get("/v1/processes").await?;
    print(&common, &out, || processes_table(&out["processes"]))
}

/// The processes of `GET /v1/processes`, a row each: role, newest format, when last seen
/// and the lease left (`delayq processes`, `delayq format show`).
pub(super) fn processes_table(processes: &Value) -> String {
    let mut t = format!(
        "{:<48} {:<8} {:>14}  {:<12} {}",
        "PROCESS", "ROLE", "READS UP TO", "LAST SEEN", "LEASE"
    );
    for p in processes.as_array().into_iter().flatten() {
        let left = p["lease_left_ms"].as_i64().unwrap_or(0);
        let lease = match left > 0 {
            true => format!("{:.1}s left", left as f64 / 1000.0),
            false => format!("ran out {:.1}s ago", -left as f64 / 1000.0),
        };
        let seen = p["seen_ms_ago"].as_i64().unwrap_or(0) as f64 / 1000.0;
        let this = match p["answering"].as_bool() {
            Some(true) => "  (this one)",
            _ => "",
        };
        t.push_str(&format!(
            "\n{:<48} {:<8} {:>14}  {:<12} {lease}{this}",
            text(&p["name"]),
            text(&p["role"]),
            format!("format {}", p["newest_format"]),
            format!("{seen:.1}s ago"),
        ));
    }
    t
}

/// Queues' stats, a row each.
fn stats_table(rows: &[Value]) -> String {
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
    for s in rows {
        let state = match s["paused"].as_bool() {
            Some(true) => "paused",
            _ => "active",
        };
        t.push_str(&format!(
            "\n{:<32} {:>10} {:>10} {:>10} {:>10} {:>10} {:>12} {:>10}  {}",
            text(&s["name"]),
            s["delayed"],
            s["ready"],
            s["in_flight"],
            s["overdue"],
            s["dead"],
            s["oldest_ready_lag_ms"],
            s["partitions"],
            state
        ));
    }
    t
}
