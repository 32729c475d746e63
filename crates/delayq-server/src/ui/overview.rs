//! The overview: every queue with its counts per state, sends and acks per second, lateness
//! over the last minutes, the lag of its oldest ready message, paused or not, and its push
//! target. Sorted and filtered by the query string, so it works without script.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use delayq::{Lateness, Minute, Stats};
use maud::html;
use serde::Deserialize;
use tokio::task::JoinSet;

use super::layout;
use super::session::Session;
use super::text::{queue_path, segment, span};
use super::visitor::Visitor;
use crate::state::AppState;

/// Minutes the lateness columns cover.
const LATENESS_MINUTES: usize = 5;

#[derive(Deserialize, Default)]
pub struct OverviewQuery {
    /// Column to sort by: name (default), delayed, ready, in_flight, dead, lag, late.
    sort: Option<String>,
    /// Only queues whose name contains this.
    q: Option<String>,
    /// What an action just did (a queue deleted), shown once.
    done: Option<String>,
}

/// One row of the overview.
struct Row {
    name: String,
    stats: Stats,
    sent_per_s: f64,
    acked_per_s: f64,
    lateness: Lateness,
}

/// What one queue's row needs: its stats and its last few minutes, read at once.
async fn row(queue: delayq::Queue) -> delayq::Result<Row> {
    let (stats, minutes) = tokio::join!(queue.stats(), queue.history(LATENESS_MINUTES));
    let (stats, minutes) = (stats?, minutes?);
    // The last whole minute gives the rates: the current one is still filling.
    let last_whole = minutes.iter().rev().nth(1).cloned().unwrap_or_default();
    let mut lateness = Lateness::default();
    for m in &minutes {
        lateness.merge(&m.lateness);
    }
    Ok(Row {
        name: queue.name().to_string(),
        stats,
        sent_per_s: per_second(&last_whole, |m| m.sent),
        acked_per_s: per_second(&last_whole, |m| m.acked),
        lateness,
    })
}

fn per_second(m: &Minute, field: impl Fn(&Minute) -> u64) -> f64 {
    field(m) as f64 / 60.0
}

/// `GET /ui`.
pub async fn page(
    State(state): State<AppState>,
    Visitor(session): Visitor,
    Query(query): Query<OverviewQuery>,
) -> Response {
    let started = std::time::Instant::now();
    let result = rows(&state, &session, query.q.as_deref()).await;
    let (mut rows, mut targets) = match result {
        Ok(r) => r,
        Err(e) => {
            let body = html! { p.notice.error role="alert" { "Redis: " (e) } };
            return layout::page("Queues", Some(&session), true, body).into_response();
        }
    };
    for url in targets.values_mut() {
        *url = session.url_shown(url);
    }
    let sort = query.sort.as_deref().unwrap_or("name");
    let key = |r: &Row| -> f64 {
        match sort {
            "delayed" => r.stats.delayed as f64,
            "ready" => r.stats.ready as f64,
            "in_flight" => r.stats.in_flight as f64,
            "dead" => r.stats.dead as f64,
            "lag" => r.stats.oldest_ready_lag_ms as f64,
            "late" => r.lateness.quantile(0.99).unwrap_or(0.0),
            _ => 0.0,
        }
    };
    if sort == "name" {
        rows.sort_by(|a, b| a.name.cmp(&b.name));
    } else {
        // Biggest first: the queue in trouble goes to the top.
        rows.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.name.cmp(&b.name)));
    }
    let filter = query.q.clone().unwrap_or_default();
    let sort_link = |column: &str| {
        let mut href = format!("/ui?sort={column}");
        if !filter.is_empty() {
            href.push_str(&format!("&q={}", segment(&filter)));
        }
        href
    };
    let heading = |column: &str, label: &str, numeric: bool| {
        html! {
            th.num[numeric] aria-sort=(if sort == column { "descending" } else { "none" }) {
                a href=(sort_link(column)) { (label) }
            }
        }
    };
    let body = html! {
        h1 { "Queues" }
        (layout::notice(query.done.as_deref()))
        form.row method="get" action="/ui" {
            input type="search" name="q" value=(filter) placeholder="Filter by name" aria-label="Filter by name";
            input type="hidden" name="sort" value=(sort);
            button type="submit" { "Filter" }
        }
        div.scroll {
            table #queues {
                thead { tr {
                    (heading("name", "Queue", false))
                    (heading("delayed", "Delayed", true))
                    (heading("ready", "Ready", true))
                    (heading("in_flight", "In flight", true))
                    th.num { "Overdue" }
                    (heading("dead", "Dead", true))
                    th.num { "Sent/s" }
                    th.num { "Acked/s" }
                    (heading("late", "Late p50 / p99", true))
                    (heading("lag", "Oldest ready", true))
                    th { "State" }
                    th { "Push to" }
                } }
                tbody {
                    @for r in &rows {
                        tr data-queue=(r.name) {
                            td { a href=(queue_path(&r.name)) { (r.name) } }
                            td.num data-state="delayed" { (r.stats.delayed) }
                            td.num data-state="ready" { (r.stats.ready) }
                            td.num data-state="in_flight" { (r.stats.in_flight) }
                            td.num.warn[r.stats.overdue > 0] data-state="overdue" title="held past the end of their lease: their consumer died or stalled" {
                                @if r.stats.overdue > 0 { (r.stats.overdue) " for " (span(r.stats.oldest_overdue_ms as f64)) } @else { "0" }
                            }
                            td.num.bad[r.stats.dead > 0] data-state="dead" { (r.stats.dead) }
                            td.num { (format!("{:.1}", r.sent_per_s)) }
                            td.num { (format!("{:.1}", r.acked_per_s)) }
                            td.num { (late(&r.lateness)) }
                            td.num.warn[r.stats.oldest_ready_lag_ms > 60_000] {
                                @if r.stats.ready > 0 { (span(r.stats.oldest_ready_lag_ms as f64)) } @else { "–" }
                            }
                            td { @if r.stats.paused { span.warn { "paused" } } @else { "running" } }
                            td { (targets.get(&r.name).map_or("", String::as_str)) }
                        }
                    }
                }
            }
        }
        @if rows.is_empty() {
            p.muted { "No queues" @if !filter.is_empty() { " match “" (filter) "”" } "." }
        }
        p.muted #footnote { (rows.len()) " queues on " (state.dq().server()) " · lateness over the last " (LATENESS_MINUTES) " minutes · rendered in "
            (format!("{:.0}", started.elapsed().as_secs_f64() * 1000.0)) " ms" }
    };
    layout::page("Queues", Some(&session), true, body).into_response()
}

/// Lateness p50 / p99 as a cell shows it.
pub fn late(l: &Lateness) -> String {
    match (l.quantile(0.5), l.quantile(0.99)) {
        (Some(p50), Some(p99)) => format!("≤{} / ≤{}", span(p50), span(p99)),
        _ => "–".into(),
    }
}

/// Every queue the session may see (whose name contains `filter`) with its row, all read
/// at once; and the push targets by queue.
async fn rows(
    state: &AppState,
    session: &Session,
    filter: Option<&str>,
) -> delayq::Result<(Vec<Row>, HashMap<String, String>)> {
    let names = state.dq().queues().await?;
    let mut reads = JoinSet::new();
    for name in names {
        if filter.is_some_and(|f| !name.as_str().contains(f)) || !session.may_use(name.as_str()) {
            continue;
        }
        if let Ok(queue) = state.queue(name.as_str()) {
            reads.spawn(row(queue));
        }
    }
    let targets = crate::push::target::all(state.dq())
        .await?
        .into_iter()
        .map(|(q, t)| (q.name().to_string(), t.url))
        .collect();
    let mut rows = Vec::new();
    while let Some(done) = reads.join_next().await {
        if let Ok(row) = done {
            rows.push(row?);
        }
    }
    Ok((rows, targets))
}
