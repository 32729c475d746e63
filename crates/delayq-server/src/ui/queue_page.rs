//! One queue: its counts, charts of the last hour or day, its messages by state a page at a
//! time, a search of their payloads, its recurring schedules and its push target.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq::{Cursor, MessageInfo, Minute, State as MessageState};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::json;

use super::chart::{self, Series};
use super::layout;
use super::session::Session;
use super::text::{group_path, queue_path, segment, span, utc};
use super::visitor::Visitor;
use crate::api::browse::{listed_body, preview, state_named, STATES};
use crate::state::AppState;

/// Messages per page of a state's list.
const PAGE: usize = 25;
/// Groups shown on a queue page, most messages first.
const TOP_GROUPS: usize = 10;

#[derive(Deserialize, Default)]
pub struct QueueQuery {
    state: Option<String>,
    cursor: Option<String>,
    /// `1h` (default) or `24h`.
    range: Option<String>,
    /// What the last action did, to show once.
    done: Option<String>,
}

/// `GET /ui/queues/{queue}`.
pub async fn page(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path(name): axum::extract::Path<String>,
    Query(query): Query<QueueQuery>,
) -> Response {
    match render(&app, &session, &name, &query).await {
        Ok(body) => layout::page(&name, Some(&session), true, body).into_response(),
        Err(e) => {
            let body = html! { h1 { (name) } p.notice.error role="alert" { (e) } };
            (
                StatusCode::BAD_REQUEST,
                layout::page(&name, Some(&session), false, body),
            )
                .into_response()
        }
    }
}

async fn render(
    app: &AppState,
    session: &Session,
    name: &str,
    query: &QueueQuery,
) -> Result<Markup, String> {
    let queue = app.queue(name).map_err(|e| e.message().to_owned())?;
    let which = state_named(query.state.as_deref().unwrap_or("ready"))?;
    let cursor = query
        .cursor
        .as_deref()
        .map(Cursor::parse)
        .transpose()
        .map_err(|e| e.to_string())?;
    let day = query.range.as_deref() == Some("24h");
    let minutes = if day { 1440 } else { 60 };
    let schedule_view = queue.schedules();
    let groups_view = queue.groups();
    let (stats, history, page, schedules, target, top_groups, latest, webhooks) = tokio::join!(
        queue.stats(),
        queue.history(minutes),
        queue.list(which, cursor.as_ref(), PAGE),
        schedule_view.list(),
        crate::push::target::load(app.dq(), &queue),
        groups_view.list(0, TOP_GROUPS),
        queue.latest_events(super::event_feed::FEED),
        crate::webhooks::config::load(app.dq(), queue.name()),
    );
    let latest = latest.map_err(|e| e.to_string())?;
    let webhooks = webhooks.map_err(|e| e.to_string())?;
    let top_groups = top_groups.map_err(|e| e.to_string())?;
    let stats = stats.map_err(|e| e.to_string())?;
    let older_format = stats.data_format < delayq::DATA_FORMAT;
    let history = history.map_err(|e| e.to_string())?;
    let page = page.map_err(|e| e.to_string())?;
    let schedules = schedules.map_err(|e| e.to_string())?;
    let mut target = target.map_err(|e| e.to_string())?;
    let mut webhooks = webhooks;
    if let Some(t) = target.as_mut() {
        t.url = session.url_shown(&t.url);
        t.failure_callback = t.failure_callback.as_deref().map(|u| session.url_shown(u));
    }
    for hook in webhooks.iter_mut().flat_map(|w| w.hooks.iter_mut()) {
        hook.url = session.url_shown(&hook.url);
    }
    let base = queue_path(name);
    let count_of = |s: MessageState| match s {
        MessageState::Delayed => stats.delayed,
        MessageState::Ready => stats.ready,
        MessageState::InFlight => stats.in_flight,
        MessageState::Completed => stats.completed,
        _ => stats.dead,
    };
    let states = STATES;
    Ok(html! {
        h1 { "Queue " (name) }
        (layout::notice(query.done.as_deref()))
        div.cards {
            @for s in states {
                div.card data-count=(s.as_str()) {
                    div.n { (count_of(s)) }
                    div.l { (label(s)) }
                }
            }
            div.card { div.n { @if stats.ready > 0 { (span(stats.oldest_ready_lag_ms as f64)) } @else { "–" } } div.l { "oldest ready" } }
            div.card #overdue {
                div.n { @if stats.overdue > 0 { span.warn { (stats.overdue) " for " (span(stats.oldest_overdue_ms as f64)) } } @else { "0" } }
                div.l { "held past their lease" }
            }
            div.card #paused-state { div.n { @if stats.paused { span.warn { "paused" } } @else { "running" } } div.l { "state" } }
            div.card #expired {
                div.n { (history.iter().map(|m| m.expired).sum::<u64>()) }
                div.l { "expired, last " (history.len()) " min" }
            }
            div.card #groups {
                div.n { (stats.groups) }
                div.l { "groups" @if let Some(n) = stats.group_concurrency { ", " (n) " in flight each" } }
            }
            div.card #data-format {
                div.n { @if older_format { span.warn { (stats.data_format) } } @else { (stats.data_format) } }
                div.l { "data format" @if older_format { " (newest " (delayq::DATA_FORMAT) ")" } }
            }
        }
        @if session.can_act() {
            form.row method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                @if stats.paused {
                    button.primary #resume type="submit" name="action" value="resume" { "Resume" }
                } @else {
                    button #pause type="submit" name="action" value="pause" { "Pause" }
                }
                @if older_format {
                    button #upgrade type="submit" name="action" value="upgrade" { "Upgrade data format" }
                }
                a href=(format!("{base}/confirm?action=delete_queue")) { button.danger #delete-queue type="button" { "Delete queue" } }
            }
            form.row #group-concurrency method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                input type="hidden" name="action" value="group_concurrency";
                label { "Messages of one group in flight at once "
                    input type="number" name="limit" min="1" placeholder="no limit" aria-label="Group concurrency"
                        value=[stats.group_concurrency];
                }
                button type="submit" { "Set" }
            }
            form.row #expiry method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                input type="hidden" name="action" value="expiry";
                label { "Never deliver later than "
                    input type="text" name="ttl" placeholder="no limit" aria-label="Default ttl" size="8"
                        value=[stats.default_ttl.map(|d| humantime::format_duration(d).to_string())];
                    " after due; then "
                    select name="on_expire" aria-label="On expire" {
                        option value="dead_letter" selected[!stats.drop_expired] { "dead letter" }
                        option value="drop" selected[stats.drop_expired] { "drop" }
                    }
                }
                label { "Refuse sends due in more than "
                    input type="text" name="max_delay" placeholder="no limit" aria-label="Max delay" size="8"
                        value=[stats.max_delay.map(|d| humantime::format_duration(d).to_string())];
                }
                button type="submit" { "Set" }
            }
            form.row #retention method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                input type="hidden" name="action" value="retention";
                label { "Keep final records of ended messages for "
                    input type="text" name="keep_for" placeholder="none" aria-label="Retention" size="8"
                        value=[stats.retain_completed.map(|r| humantime::format_duration(r.keep_for).to_string())];
                }
                label { " at most "
                    input type="number" name="limit" min="1" placeholder="10000" aria-label="Records kept"
                        value=[stats.retain_completed.map(|r| r.max)];
                }
                button type="submit" { "Set" }
            }
            form.row #group-rate-limit method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                input type="hidden" name="action" value="group_rate_limit";
                label { "Deliveries of one group a second "
                    input type="number" name="rate" min="1" placeholder="no limit" aria-label="Group rate limit"
                        value=[stats.group_rate_limit.map(|l| l.per_second)];
                    " burst "
                    input type="number" name="burst" min="1" placeholder="1" aria-label="Group burst"
                        value=[stats.group_rate_limit.map(|l| l.burst)];
                }
                button type="submit" { "Set" }
            }
            form.row #encryption method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                span { @if stats.encrypted { "Payloads are encrypted at rest." } @else { "Payloads are stored in clear." } }
                @if stats.encrypted {
                    button type="submit" name="action" value="encryption_off" { "Store new payloads in clear" }
                } @else {
                    button type="submit" name="action" value="encryption_on" { "Encrypt new payloads" }
                }
                button type="submit" name="action" value="rotate_keys" { "Seal stored payloads with the newest key" }
            }
        }
        @if !top_groups.groups.is_empty() {
            h2 { "Top groups" }
            div.scroll { table #top-groups {
                thead { tr { th { "Group" } th { "Messages" } } }
                tbody {
                    @for g in &top_groups.groups {
                        tr { td { a href=(group_path(name, &g.name)) { (g.name) } } td { (g.messages) } }
                    }
                }
            } }
        }
        h2 { "Last " @if day { "24 hours" } @else { "hour" } }
        div.tabs {
            a.on[!day] href=(format!("{base}?range=1h")) { "1 hour" }
            a.on[day] href=(format!("{base}?range=24h")) { "24 hours" }
        }
        (charts(&history, target.is_some()))
        h2 { "Messages" }
        nav.tabs {
            @for s in states {
                a.on[s == which] href=(format!("{base}?state={}", s.as_str())) { (label(s)) " (" (count_of(s)) ")" }
            }
        }
        @if matches!(which, MessageState::Delayed | MessageState::Ready) && count_of(which) > 0 && session.can_act() {
            div.row {
                a href=(format!("{base}/confirm?action=cancel_all&state={}", which.as_str())) {
                    button.danger #cancel-all type="button" { "Cancel all " (count_of(which)) " " (which.as_str()) }
                }
            }
        }
        @if which == MessageState::Dead && stats.dead > 0 && session.can_act() {
            div.row {
                a href=(format!("{base}/confirm?action=requeue_all")) { button #requeue-all type="button" { "Requeue all " (stats.dead) } }
                a href=(format!("{base}/confirm?action=purge_all")) { button.danger #purge-all type="button" { "Purge all " (stats.dead) } }
            }
        }
        (message_table(&base, which, &page.messages))
        div.row {
            @if cursor.is_some() { a href=(format!("{base}?state={}", which.as_str())) { "First page" } }
            @if let Some(next) = &page.next {
                a #next-page href=(format!("{base}?state={}&cursor={}", which.as_str(), next)) { "Next page" }
            }
        }
        (super::event_feed::section(session, name, (&stats, &latest), webhooks.as_ref()))
        h2 { "Search" }
        form #search .row method="get" action=(format!("{base}/search")) data-total=(count_of(which)) {
            select name="state" aria-label="State" {
                @for s in states { option value=(s.as_str()) selected[s == which] { (label(s)) } }
            }
            input type="search" name="contains" placeholder="Text in the payload or id" aria-label="Text to find" required;
            button type="submit" { "Search" }
            button #search-stop type="button" hidden { "Stop" }
            span #search-progress .muted {}
        }
        div.scroll { table { tbody #search-results {} } }
        @if session.can_act() {
            // Shown by the page's script when a search of delayed or ready messages found some.
            div.row { a #cancel-found hidden href=(format!("{base}/confirm?action=cancel_all")) {
                button.danger type="button" { "Cancel what this search found" }
            } }
        }
        @if !schedules.is_empty() {
            h2 { "Recurring schedules" }
            div.scroll { table {
                thead { tr { th { "Name" } th { "When" } th { "Time zone" } th { "Missed ticks, firing" } th { "Last sent" } th { "Next (UTC)" } th { "State" } } }
                tbody {
                    @for s in &schedules {
                        tr data-schedule=(s.name) {
                            td { (s.name) }
                            @match (s.recurrence.as_cron(), s.recurrence.as_interval()) {
                                (Some((expr, tz)), _) => { td.when { code { (expr) } } td.tz { (tz) } }
                                (None, _) => { td.when { (s.recurrence) } td.tz { "–" } }
                            }
                            td {
                                (s.missed.to_string())
                                @if let Some(j) = s.firing.jitter { br; "jitter " (humantime::format_duration(j)) }
                                @if s.firing.overlap == delayq::Overlap::Skip { br; span.overlap { "no overlap" } }
                            }
                            td { (s.last_tick_ms.map(utc).unwrap_or_else(|| "–".into())) }
                            td { @for t in s.next_ticks_ms.iter().take(3) { (utc(*t)) br; } }
                            td {
                                @if s.paused { span.warn { "paused" } } @else { "running" }
                                @if session.can_act() {
                                    form.row method="post" action=(format!("{base}/act")) {
                                        (layout::csrf(session))
                                        input type="hidden" name="schedule" value=(s.name);
                                        @if s.paused {
                                            button type="submit" name="action" value="schedule_resume" { "Resume" }
                                        } @else {
                                            button type="submit" name="action" value="schedule_pause" { "Pause" }
                                        }
                                    }
                                    form.row.backfill method="post" action=(format!("{base}/act")) {
                                        (layout::csrf(session))
                                        input type="hidden" name="schedule" value=(s.name);
                                        label { "Missed ticks from (UTC) " input type="datetime-local" name="at" step="1" required; }
                                        label { " to " input type="datetime-local" name="until" step="1" required; }
                                        button type="submit" name="action" value="schedule_backfill" { "Backfill" }
                                    }
                                }
                            }
                        }
                    }
                }
            } }
        }
        @if let Some(t) = &target {
            h2 { "Push target" }
            dl.fields {
                dt { "URL" } dd { (t.method) " " (t.url) }
                dt { "Timeout" } dd { (span(t.timeout_ms as f64)) }
                dt { "Concurrency" } dd { (t.concurrency) " per server" }
                @if let Some(cb) = &t.failure_callback { dt { "Failure callback" } dd { (cb) } }
                dt { "Message URLs" }
                dd #message-urls {
                    @if t.allow_message_urls.is_empty() { span.muted { "not allowed" } }
                    @else { "allowed on " (t.allow_message_urls.join(", ")) }
                }
            }
            @let recent = history.iter().rev().take(5).fold([0u64; 6], |mut sum, m| {
                for (s, n) in sum.iter_mut().zip(m.push_responses) { *s += n; }
                sum
            });
            p #push-answers {
                "Answers in the last 5 minutes: "
                @for (class, n) in ["1xx", "2xx", "3xx", "4xx", "5xx", "no answer"].iter().zip(recent) {
                    @if n > 0 { span.bad[*class == "5xx" || *class == "no answer"] { (class) ": " (n) } " " }
                }
                @if recent.iter().all(|&n| n == 0) { span.muted { "none" } }
            }
        }
    })
}

fn label(s: MessageState) -> &'static str {
    match s {
        MessageState::Delayed => "Delayed",
        MessageState::Ready => "Ready",
        MessageState::InFlight => "In flight",
        MessageState::Completed => "Completed",
        _ => "Dead",
    }
}

/// The time a list shows for a message: when it is due, its lease ends, it died, or it
/// ended (and how).
fn when(m: &MessageInfo) -> String {
    if let Some(done) = &m.completion {
        return format!("{} {}", done.outcome.as_str(), utc(done.finished_at_ms));
    }
    match (m.lease_deadline_ms, m.died_at_ms) {
        (Some(lease), _) => format!("lease until {}", utc(lease)),
        (_, Some(died)) => format!("died {}", utc(died)),
        _ => utc(m.due_ms),
    }
}

fn message_table(base: &str, which: MessageState, messages: &[MessageInfo]) -> Markup {
    html! {
        div.scroll { table #messages data-state=(which.as_str()) {
            thead { tr {
                th { "Id" }
                th { @match which { MessageState::InFlight => "Lease", MessageState::Dead => "Died", MessageState::Completed => "Ended", _ => "Due" } }
                th.num { "Attempts" }
                th { "Last error" }
                th { "Payload" }
            } }
            tbody {
                @for m in messages {
                    tr data-id=(m.id) {
                        td { a href=(format!("{base}/messages/{}", segment(&m.id))) { (m.id) } }
                        td { (when(m)) }
                        td.num { (m.attempts) "/" (m.max_attempts) }
                        td.preview { (m.last_error.as_deref().unwrap_or("")) }
                        td.preview {
                            @match m.sealed.as_ref().and_then(|s| s.key()) {
                                Some(key) => em { "encrypted (key " (key) ")" },
                                None => (preview(listed_body(m).1)),
                            }
                        }
                    }
                }
                @if messages.is_empty() { tr { td colspan="5" .muted { "None." } } }
            }
        } }
    }
}

fn charts(history: &[Minute], push: bool) -> Markup {
    let (first, last) = match (history.first(), history.last()) {
        (Some(f), Some(l)) => (utc(f.start_ms), utc(l.start_ms)),
        _ => (String::new(), String::new()),
    };
    let per_minute = |f: fn(&Minute) -> u64| history.iter().map(|m| Some(f(m) as f64)).collect();
    let quantile = |q: f64| history.iter().map(|m| m.lateness.quantile(q)).collect();
    let counts = [
        Series {
            name: "sent",
            colour: "--s1",
            values: per_minute(|m| m.sent),
        },
        Series {
            name: "delivered",
            colour: "--s3",
            values: per_minute(|m| m.delivered),
        },
        Series {
            name: "acked",
            colour: "--s2",
            values: per_minute(|m| m.acked),
        },
        Series {
            name: "failed",
            colour: "--s4",
            values: per_minute(|m| m.failed),
        },
    ];
    let lateness = [
        Series {
            name: "p50",
            colour: "--s2",
            values: quantile(0.5),
        },
        Series {
            name: "p99",
            colour: "--s4",
            values: quantile(0.99),
        },
    ];
    let answers = |class: usize| {
        history
            .iter()
            .map(|m| Some(m.push_responses[class] as f64))
            .collect()
    };
    let push_answers = [
        Series {
            name: "2xx",
            colour: "--s2",
            values: answers(1),
        },
        Series {
            name: "4xx",
            colour: "--s3",
            values: answers(3),
        },
        Series {
            name: "5xx",
            colour: "--s4",
            values: answers(4),
        },
        Series {
            name: "no answer",
            colour: "--s1",
            values: answers(5),
        },
    ];
    html! {
        div.charts {
            (chart::lines("Messages per minute", &counts, &first, &last, |v| format!("{v:.0}")))
            (chart::lines("Lateness per minute (claim minus due)", &lateness, &first, &last, span))
            @if push {
                (chart::lines("Push answers per minute", &push_answers, &first, &last, |v| format!("{v:.0}")))
            }
        }
    }
}

#[derive(Deserialize)]
pub struct SearchQuery {
    state: String,
    contains: String,
    cursor: Option<String>,
}

/// `GET /ui/queues/{queue}/search`: one step of a search, as JSON for the page's script.
pub async fn search_step(
    State(app): State<AppState>,
    Visitor(_): Visitor,
    axum::extract::Path(name): axum::extract::Path<String>,
    Query(query): Query<SearchQuery>,
) -> Response {
    let step = async {
        let queue = app.queue(&name).map_err(|e| e.message().to_owned())?;
        let which = state_named(&query.state)?;
        let cursor = query
            .cursor
            .as_deref()
            .map(Cursor::parse)
            .transpose()
            .map_err(|e| e.to_string())?;
        queue
            .search(which, query.contains.as_bytes(), cursor.as_ref(), 500)
            .await
            .map_err(|e| e.to_string())
    };
    match step.await {
        Ok(page) => {
            let base = queue_path(&name);
            let messages: Vec<_> = page
                .messages
                .iter()
                .map(|m| {
                    json!({
                        "id": m.id,
                        "href": format!("{base}/messages/{}", segment(&m.id)),
                        "when": when(m),
                        "attempts": m.attempts,
                        "preview": preview(listed_body(m).1),
                    })
                })
                .collect();
            Json(json!({
                "messages": messages,
                "scanned": page.scanned,
                "next": page.next.map(|c| c.to_string()),
            }))
            .into_response()
        }
        Err(e) => (
            StatusCode::BAD_REQUEST,
            Json(json!({ "error": { "code": "invalid_option", "message": e } })),
        )
            .into_response(),
    }
}
