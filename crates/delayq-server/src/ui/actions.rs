//! What the dashboard's buttons do. Every action is a POST that needs an admin session and
//! that session's CSRF token; it answers with a redirect (303) to the page to see the result
//! on, so reloading that page repeats nothing. Bulk actions (on dead letters, a queue's
//! delete, a bulk cancel: `bulk_cancel.rs`) first show a confirmation that names what they
//! touch.

use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use delayq::Schedule;
use maud::html;
use serde::Deserialize;

use super::layout;
use super::session::Session;
use super::text::{group_path, queue_path, segment};
use super::visitor::Visitor;
use crate::api::body::FormBody;
use crate::state::AppState;

#[derive(Deserialize)]
pub struct ActionForm {
    #[serde(default)]
    csrf: String,
    pub(super) action: String,
    /// Reschedule: the new due time, `YYYY-MM-DDTHH:MM[:SS]` in UTC.
    at: Option<String>,
    /// Group concurrency: the new limit (empty: none).
    limit: Option<String>,
    /// A group's weight.
    weight: Option<String>,
    /// A rate limit: deliveries a second (empty: none).
    rate: Option<String>,
    /// A rate limit's burst (empty: 1).
    burst: Option<String>,
    /// Expiry: the default ttl (`10m`; empty: none).
    ttl: Option<String>,
    /// Expiry: `dead_letter` or `drop`.
    on_expire: Option<String>,
    /// The queue's max delay (`30d`; empty: none).
    max_delay: Option<String>,
    /// The recurring schedule to pause or resume.
    schedule: Option<String>,
    /// Retention: how long final records are kept (`7d`; empty: none), with `limit` the
    /// most kept per partition.
    keep_for: Option<String>,
    /// A schedule's backfill: from `at` to this time, `YYYY-MM-DDTHH:MM[:SS]` in UTC.
    until: Option<String>,
    /// A queue's delete: `1` to delete the messages it holds too.
    force: Option<String>,
    /// A bulk cancel: the state (`delayed` or `ready`).
    state: Option<String>,
    /// A bulk cancel: only messages whose payload or id contains this.
    contains: Option<String>,
}

/// A number a form asks for (`what` names it in the error): a whole number, or empty for
/// none.
fn optional_number<T: std::str::FromStr>(
    text: Option<&str>,
    what: &str,
) -> Result<Option<T>, String> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => t
            .parse()
            .map(Some)
            .map_err(|_| format!("{what} is a whole number, not {t:?}")),
    }
}

/// A rate limit a form asks for: `rate` a second, bursts of `burst` (empty: 1); an empty
/// rate for none.
fn optional_rate(form: &ActionForm) -> Result<Option<delayq::RateLimit>, String> {
    let Some(per_second) = optional_number(form.rate.as_deref(), "a rate limit")? else {
        return Ok(None);
    };
    let burst = optional_number(form.burst.as_deref(), "a burst")?.unwrap_or(1);
    Ok(Some(delayq::RateLimit { per_second, burst }))
}

/// A duration a form asks for (`what` names it in the error), or empty for none.
fn optional_duration(
    text: Option<&str>,
    what: &str,
) -> Result<Option<std::time::Duration>, String> {
    match text.map(str::trim).filter(|t| !t.is_empty()) {
        None => Ok(None),
        Some(t) => humantime::parse_duration(t)
            .map(Some)
            .map_err(|e| format!("{what} is a duration like 10m, not {t:?}: {e}")),
    }
}

/// The expiry form's settings: a default ttl (empty: none), what an expired message
/// becomes, and the longest delay a send may ask for (empty: none).
fn expiry_settings(form: &ActionForm) -> Result<[delayq::Setting; 3], String> {
    let ttl = optional_duration(form.ttl.as_deref(), "a default ttl")?;
    let max_delay = optional_duration(form.max_delay.as_deref(), "a max delay")?;
    let action = match form.on_expire.as_deref().unwrap_or("dead_letter") {
        "dead_letter" => delayq::OnExpire::DeadLetter,
        "drop" => delayq::OnExpire::Drop,
        other => return Err(format!("on_expire is dead_letter or drop, not {other:?}")),
    };
    Ok([
        delayq::Setting::DefaultTtl(ttl),
        delayq::Setting::OnExpire(action),
        delayq::Setting::MaxDelay(max_delay),
    ])
}

/// The retention a form asks for: none when `keep_for` is empty, else with `limit` records
/// at most (default 10,000).
fn retention_setting(form: &ActionForm) -> Result<delayq::Setting, String> {
    let keep_for = optional_duration(form.keep_for.as_deref(), "a retention")?;
    let max = optional_number(form.limit.as_deref(), "a number of records")?.unwrap_or(10_000);
    Ok(delayq::Setting::RetainCompleted(
        keep_for.map(|keep_for| delayq::Retention { keep_for, max }),
    ))
}

/// Why the action is refused (403), unless an admin sent it with this session's CSRF token.
fn refusal(session: &Session, form: &ActionForm) -> Option<Response> {
    let why = if !session.csrf_matches(&form.csrf) {
        "bad or missing CSRF token"
    } else if !session.can_act() {
        "only an admin token can act"
    } else {
        return None;
    };
    Some((StatusCode::FORBIDDEN, why).into_response())
}

/// The queue an admin's action, with this session's CSRF token, is on; otherwise the answer
/// that refuses it.
fn queue_to_act_on(
    app: &AppState,
    session: &Session,
    form: &ActionForm,
    name: &str,
) -> Result<delayq::Queue, Box<Response>> {
    if let Some(refused) = refusal(session, form) {
        return Err(Box::new(refused));
    }
    app.queue(name).map_err(|e| Box::new(failed(e.message())))
}

/// Where to go after an action, with what it did.
fn then(to: &str, done: &str) -> Response {
    Redirect::to(&format!(
        "{to}{}done={}",
        if to.contains('?') { "&" } else { "?" },
        segment(done)
    ))
    .into_response()
}

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::BAD_REQUEST, e.to_string()).into_response()
}

/// `POST /ui/queues/{queue}/act`: `pause`, `resume`, `upgrade`, `group_concurrency`,
/// `group_rate_limit`, `expiry`, `schedule_pause`, `schedule_resume`, `requeue_all`,
/// `purge_all`, `delete_queue` (with `force=1` when it holds messages), `cancel_all` (with
/// `state`, and `contains` for a search's: `bulk_cancel.rs`), `encryption_on`,
/// `encryption_off`, `rotate_keys`.
pub async fn queue_action(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path(name): axum::extract::Path<String>,
    FormBody(form): FormBody<ActionForm>,
) -> Response {
    let queue = match queue_to_act_on(&app, &session, &form, &name) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    let base = queue_path(&name);
    if form.action == "delete_queue" {
        return delete_queue(&app, &queue, form.force.as_deref() == Some("1")).await;
    }
    if form.action == "cancel_all" {
        let state = match super::bulk_cancel::cancellable(form.state.as_deref()) {
            Ok(state) => state,
            Err(why) => return failed(why),
        };
        let contains = form.contains.as_deref().filter(|t| !t.is_empty());
        return match super::bulk_cancel::cancel_matching(&queue, state, contains).await {
            Ok(done) => then(
                &format!("{base}?state={}", state.as_str()),
                &super::bulk_cancel::done_text(&done),
            ),
            Err(e) => failed(e),
        };
    }
    let done = match form.action.as_str() {
        "pause" => queue.pause().await.map(|()| "Paused.".to_owned()),
        "resume" => queue.resume().await.map(|()| "Resumed.".to_owned()),
        "upgrade" => queue
            .upgrade_format()
            .await
            .map(|f| format!("Upgraded: data format {}.", f.format())),
        "group_concurrency" => {
            match optional_number(form.limit.as_deref(), "a group concurrency") {
                Ok(limit) => queue
                    .configure(&[delayq::Setting::GroupConcurrency(limit)])
                    .await
                    .map(|()| match limit {
                        Some(n) => format!("Group concurrency: {n}."),
                        None => "Group concurrency: no limit.".to_owned(),
                    }),
                Err(e) => return failed(e),
            }
        }
        "expiry" => match expiry_settings(&form) {
            Ok(settings) => queue
                .configure(&settings)
                .await
                .map(|()| "Expiry settings changed.".to_owned()),
            Err(e) => return failed(e),
        },
        "events" => match optional_number(form.limit.as_deref(), "how many events to keep") {
            Ok(kept) => {
                let kept = kept.unwrap_or(delayq::DEFAULT_EVENTS_KEPT);
                queue
                    .configure(&[delayq::Setting::Events(Some(kept))])
                    .await
                    .map(|()| format!("Recording events, about {kept} per partition."))
            }
            Err(e) => return failed(e),
        },
        "events_off" => queue
            .configure(&[delayq::Setting::Events(None)])
            .await
            .map(|()| "Events stopped and dropped.".to_owned()),
        "encryption_on" | "encryption_off" => {
            let on = form.action == "encryption_on";
            queue
                .configure(&[delayq::Setting::Encryption(on)])
                .await
                .map(|()| match on {
                    true => "Payloads sent from now on are encrypted.".to_owned(),
                    false => "Payloads sent from now on are in clear.".to_owned(),
                })
        }
        "rotate_keys" => queue.rotate_keys().await.map(|done| {
            format!(
                "{} sealed again with key {}; {} changed meanwhile, {} sealed with a key this server lacks, {} in flight.",
                done.resealed, done.key, done.changed, done.unopened, done.in_flight
            )
        }),
        "retention" => match retention_setting(&form) {
            Ok(setting) => queue
                .configure(&[setting])
                .await
                .map(|()| "Retention changed.".to_owned()),
            Err(e) => return failed(e),
        },
        "schedule_backfill" => {
            let name = form.schedule.as_deref().unwrap_or_default();
            let time = |t: Option<&str>| t.and_then(parse_utc);
            let (Some(from), Some(to)) = (time(form.at.as_deref()), time(form.until.as_deref()))
            else {
                return failed("give the range to backfill: from and to, in UTC");
            };
            match queue.schedules().backfill(name, from, to).await {
                Ok(None) => return failed(format!("no schedule {name:?}")),
                Ok(Some(done)) => Ok(format!(
                    "Schedule {name}: {} missed ticks sent, {} sent before.",
                    done.sent, done.already_sent
                )),
                Err(e) => Err(e),
            }
        }
        "schedule_pause" | "schedule_resume" => {
            let name = form.schedule.as_deref().unwrap_or_default();
            let schedules = queue.schedules();
            let done = match form.action.as_str() {
                "schedule_pause" => schedules.pause(name).await,
                _ => schedules.resume(name).await,
            };
            match done {
                Ok(false) => return failed(format!("no schedule {name:?}")),
                other => other.map(|_| format!("Schedule {name}: done.")),
            }
        }
        "group_rate_limit" => match optional_rate(&form) {
            Ok(limit) => queue
                .configure(&[delayq::Setting::GroupRateLimit(limit)])
                .await
                .map(|()| match limit {
                    Some(l) => format!("Group rate limit: {}/s, burst {}.", l.per_second, l.burst),
                    None => "Group rate limit: none.".to_owned(),
                }),
            Err(e) => return failed(e),
        },
        "requeue_all" => queue
            .dead_letters()
            .requeue_all()
            .await
            .map(|n| format!("Requeued {n} dead letters.")),
        "purge_all" => queue
            .dead_letters()
            .purge_all()
            .await
            .map(|n| format!("Purged {n} dead letters.")),
        other => return failed(format!("no such action: {other}")),
    };
    match done {
        Ok(text) if form.action.ends_with("_all") => then(&format!("{base}?state=dead"), &text),
        Ok(text) => then(&base, &text),
        Err(e) => failed(e),
    }
}

/// Deletes `queue` ([`AppState::delete_queue`]), then shows the queue list; refused (409) while it holds
/// messages unless `force`.
async fn delete_queue(app: &AppState, queue: &delayq::Queue, force: bool) -> Response {
    match app.delete_queue(queue, force).await {
        Ok(deleted) => {
            let text = format!(
                "Deleted queue {} ({} messages).",
                queue.name(),
                deleted.messages
            );
            then("/ui", &text)
        }
        Err(e @ delayq::Error::NotEmpty { .. }) => {
            (StatusCode::CONFLICT, e.to_string()).into_response()
        }
        Err(e) => failed(e),
    }
}

/// `POST /ui/queues/{queue}/groups/{group}/act`: `pause`, `resume`, `settings` (its own
/// concurrency and rate limit, each empty for the queue's, and its weight).
pub async fn group_action(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path((name, group)): axum::extract::Path<(String, String)>,
    FormBody(form): FormBody<ActionForm>,
) -> Response {
    let queue = match queue_to_act_on(&app, &session, &form, &name) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    let groups = queue.groups();
    let done = match form.action.as_str() {
        "pause" => groups.pause(&group).await.map(|_| "Paused.".to_owned()),
        "resume" => groups.resume(&group).await.map(|_| "Resumed.".to_owned()),
        "settings" => {
            let limit = match optional_number(form.limit.as_deref(), "a group concurrency") {
                Ok(limit) => limit,
                Err(e) => return failed(e),
            };
            let weight = match optional_number(form.weight.as_deref(), "a group weight") {
                Ok(weight) => weight,
                Err(e) => return failed(e),
            };
            let rate_limit = match optional_rate(&form) {
                Ok(limit) => limit,
                Err(e) => return failed(e),
            };
            let settings = delayq::GroupSettings {
                concurrency: Some(limit),
                weight: Some(weight),
                paused: None,
                rate_limit: Some(rate_limit),
            };
            groups
                .configure(&group, settings)
                .await
                .map(|_| "Settings changed.".to_owned())
        }
        other => return failed(format!("no such action: {other}")),
    };
    match done {
        Ok(text) => then(&group_path(&name, &group), &text),
        Err(e) => failed(e),
    }
}

#[derive(Deserialize)]
pub struct ConfirmQuery {
    action: String,
    /// A bulk cancel's state.
    state: Option<String>,
    /// A bulk cancel's search text.
    contains: Option<String>,
}

/// `GET /ui/queues/{queue}/confirm?action=requeue_all|purge_all|delete_queue|cancel_all`: says
/// how many dead letters (or, for a delete, messages; for a bulk cancel, which) the action
/// will touch, and asks.
pub async fn confirm(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path(name): axum::extract::Path<String>,
    Query(query): Query<ConfirmQuery>,
) -> Response {
    let verb = match query.action.as_str() {
        "requeue_all" => "Requeue",
        "purge_all" => "Purge",
        "delete_queue" => return confirm_delete(&app, &session, &name).await,
        "cancel_all" => {
            let (state, contains) = (query.state.as_deref(), query.contains.as_deref());
            return super::bulk_cancel::confirm(&app, &session, &name, state, contains).await;
        }
        other => return failed(format!("no such action: {other}")),
    };
    let count = match app.queue(&name) {
        Ok(q) => match q.dead_letters().count().await {
            Ok(n) => n,
            Err(e) => return failed(e),
        },
        Err(e) => return failed(e.message()),
    };
    let base = queue_path(&name);
    let body = html! {
        h1 { (verb) " all dead letters?" }
        p #confirm-text {
            (verb) " all " strong { (count) } " dead letters of queue " strong { (name) } "?"
            @if verb == "Purge" { " They are deleted for good." } @else { " They become ready now, attempts reset." }
        }
        div.row {
            form.inline method="post" action=(format!("{base}/act")) {
                (layout::csrf(&session))
                button.danger[verb == "Purge"].primary[verb == "Requeue"] #confirm type="submit" name="action" value=(query.action) {
                    (verb) " " (count)
                }
            }
            a href=(format!("{base}?state=dead")) { "Cancel" }
        }
    };
    layout::page("Confirm", Some(&session), false, body).into_response()
}

/// The delete's question: how many messages go with the queue.
async fn confirm_delete(app: &AppState, session: &super::session::Session, name: &str) -> Response {
    let held = match app.queue(name) {
        Ok(q) => match q.stats().await {
            Ok(s) => s.held(),
            Err(e) => return failed(e),
        },
        Err(e) => return failed(e.message()),
    };
    let base = queue_path(name);
    let body = html! {
        h1 { "Delete queue " (name) "?" }
        p #confirm-text {
            "Queue " strong { (name) } " holds " strong { (held) } " messages"
            @if held > 0 { " (pending, in flight and dead): they are deleted with it, for good." } @else { "." }
            " Its settings, schedules, events, history, push target and webhooks go too. Stop its producers first: a message sent afterwards starts it again."
        }
        div.row {
            form.inline method="post" action=(format!("{base}/act")) {
                (layout::csrf(session))
                @if held > 0 { input type="hidden" name="force" value="1"; }
                button.danger #confirm type="submit" name="action" value="delete_queue" {
                    "Delete " (name)
                }
            }
            a href=(base) { "Cancel" }
        }
    };
    layout::page("Confirm", Some(session), false, body).into_response()
}

/// `POST /ui/queues/{queue}/messages/{id}/act`: `cancel`, `deliver_now`, `reschedule` (with
/// `at`), `requeue`, `purge`.
pub async fn message_action(
    State(app): State<AppState>,
    Visitor(session): Visitor,
    axum::extract::Path((name, id)): axum::extract::Path<(String, String)>,
    FormBody(form): FormBody<ActionForm>,
) -> Response {
    let queue = match queue_to_act_on(&app, &session, &form, &name) {
        Ok(q) => q,
        Err(refused) => return *refused,
    };
    let base = queue_path(&name);
    let here = format!("{base}/messages/{}", segment(&id));
    match form.action.as_str() {
        "cancel" => match queue.cancel(&id).await {
            Ok(outcome) => then(&base, &format!("Cancel {id}: {outcome:?}.")),
            Err(e) => failed(e),
        },
        "deliver_now" => match queue.reschedule(&id, Schedule::Now).await {
            Ok(_) => then(&here, "Due now."),
            Err(e) => failed(e),
        },
        "reschedule" => {
            let Some(at) = form.at.as_deref().and_then(parse_utc) else {
                return failed("reschedule needs a time: YYYY-MM-DDTHH:MM[:SS], UTC");
            };
            match queue.reschedule(&id, Schedule::At(at)).await {
                Ok(due) => then(&here, &format!("Due at {}.", super::text::utc(due))),
                Err(e) => failed(e),
            }
        }
        "requeue" => match queue.dead_letters().requeue(&id).await {
            Ok(true) => then(&here, "Requeued: ready now."),
            Ok(false) => failed(format!("{id} is not a dead letter")),
            Err(e) => failed(e),
        },
        "purge" => match queue.dead_letters().purge(&id).await {
            Ok(true) => then(&base, &format!("Purged {id}.")),
            Ok(false) => failed(format!("{id} is not a dead letter")),
            Err(e) => failed(e),
        },
        other => failed(format!("no such action: {other}")),
    }
}

/// A `datetime-local` value (`2026-11-23T18:30` or with seconds), read as UTC, or a full
/// RFC 3339 time with its offset; in ms.
fn parse_utc(text: &str) -> Option<u64> {
    let text = text.trim();
    if let Ok(ms) = crate::rfc3339::unix_ms(text) {
        return Some(ms);
    }
    let with_seconds = if text.len() == 16 {
        format!("{text}:00")
    } else {
        text.to_owned()
    };
    let t = humantime::parse_rfc3339(&format!("{with_seconds}Z")).ok()?;
    t.duration_since(std::time::UNIX_EPOCH)
        .ok()
        .map(|d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetime_local_values_read_as_utc() {
        assert_eq!(parse_utc("1970-01-01T00:01"), Some(60_000));
        assert_eq!(parse_utc("1970-01-01T00:00:02"), Some(2_000));
        assert_eq!(parse_utc("1970-01-01T01:00:02+01:00"), Some(2_000));
        assert_eq!(parse_utc("tomorrow"), None);
    }
}
