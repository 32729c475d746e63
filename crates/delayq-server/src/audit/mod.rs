//! The audit log: every admin action and every destructive one (settings, pause, purge,
//! requeue, cancel, queue create and delete, push targets, webhooks, schedules, groups, data
//! format upgrades, the dashboard's actions, tokens reloaded), with who did it (the token's
//! name, never its secret), through what (the API, the dashboard, the local CLI), what, on
//! which queue and ids, when, from which address, and its outcome. A refused attempt (401,
//! 403) is recorded too.
//!
//! Entries go to a Redis stream, `dq:audit`, trimmed to about the newest
//! `--audit-max-entries` (`record.rs`), and to the log as `audit` events; admins read them
//! (`GET /v1/audit`, `delayq audit`, the dashboard's audit page). Which routes are audited is
//! the table [`action_of`]; the one request layer (`request_layer.rs`) asks it of every
//! request, and what is not in it costs a lookup.

mod record;

use std::future::Future;
use std::net::SocketAddr;

use axum::extract::{ConnectInfo, FromRequestParts, MatchedPath, RawPathParams};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, StatusCode};
use axum::response::Response;

pub use record::{read, write, Entry, Page, AUDIT_KEY};

use crate::state::AppState;

/// What a handler adds to its response (as an extension) for the audit log: the ids it acted
/// on, and for a dashboard form the action it took (its route says only "act").
#[derive(Debug, Clone, Default)]
pub struct Detail {
    /// Who, where the request's head does not say it (a dashboard session's token).
    pub actor: Option<String>,
    /// The action, where the route does not say it (a dashboard form's).
    pub action: Option<String>,
    /// The ids acted on, besides those in the path.
    pub ids: Vec<String>,
}

/// The action of an audited route (`method`, route template), or `None`.
pub fn action_of(method: &Method, route: &str) -> Option<&'static str> {
    let action = match (method.as_str(), route) {
        ("PUT", "/v1/queues/{queue}") => "create_queue",
        ("PATCH", "/v1/queues/{queue}") => "configure",
        ("DELETE", "/v1/queues/{queue}") => "delete_queue",
        ("POST", "/v1/queues/{queue}/pause") => "pause",
        ("POST", "/v1/queues/{queue}/resume") => "resume",
        ("POST", "/v1/queues/{queue}/purge") => "purge",
        ("POST", "/v1/queues/{queue}/requeue") => "requeue",
        ("DELETE", "/v1/queues/{queue}/messages/{id}") => "cancel",
        ("POST", "/v1/queues/{queue}/cancel") => "cancel_many",
        ("PUT", "/v1/queues/{queue}/push") => "push_target_set",
        ("DELETE", "/v1/queues/{queue}/push") => "push_target_remove",
        ("PUT", "/v1/queues/{queue}/webhooks") => "webhooks_set",
        ("DELETE", "/v1/queues/{queue}/webhooks") => "webhooks_remove",
        ("PUT", "/v1/queues/{queue}/schedules/{name}") => "schedule_put",
        ("PATCH", "/v1/queues/{queue}/schedules/{name}") => "schedule_state",
        ("DELETE", "/v1/queues/{queue}/schedules/{name}") => "schedule_delete",
        ("POST", "/v1/queues/{queue}/schedules/{name}/backfill") => "schedule_backfill",
        ("PATCH", "/v1/queues/{queue}/groups/{group}") => "group_configure",
        ("POST", "/v1/queues/{queue}/upgrade") => "format_upgrade",
        ("POST", "/v1/queues/{queue}/rotate-keys") => "rotate_keys",
        // (Their handlers name the form's action: `ui/audited_actions.rs`.)
        ("POST", "/ui/queues/{queue}/act") => "dashboard:queue",
        ("POST", "/ui/queues/{queue}/groups/{group}/act") => "dashboard:group",
        ("POST", "/ui/queues/{queue}/messages/{id}/act") => "dashboard:message",
        _ => return None,
    };
    Some(action)
}

/// An audited request on its way: what is known of it before it runs.
pub struct Pending {
    action: &'static str,
    via: &'static str,
    actor: String,
    queue: String,
    ids: Vec<String>,
    from: String,
}

impl Pending {
    /// The audit entry to be of a request (its head, `parts`), if its route is audited.
    pub async fn of(state: &AppState, parts: &mut Parts) -> Option<Pending> {
        // Reads and the hot paths (send, receive, ack) are never audited: out at once.
        if parts.method == Method::GET || parts.method == Method::HEAD {
            return None;
        }
        let route = parts.extensions.get::<MatchedPath>()?.as_str().to_owned();
        let action = action_of(&parts.method, &route)?;
        let mut queue = String::new();
        let mut ids = Vec::new();
        if let Ok(params) = RawPathParams::from_request_parts(parts, &()).await {
            for (key, value) in params.iter() {
                match key {
                    "queue" => queue = value.to_owned(),
                    _ => ids.push(value.to_owned()),
                }
            }
        }
        // A dashboard form's handler names its session's token (`ui/audited_actions.rs`);
        // one that never ran had no session.
        let (via, actor) = match route.starts_with("/ui/") {
            true => ("dashboard", "(not logged in)".to_owned()),
            false => (state.audit_via(), api_actor(state, &parts.headers)),
        };
        Some(Pending {
            action,
            via,
            actor,
            queue,
            ids,
            from: from_of(parts),
        })
    }

    /// Records the entry with the outcome of `response` (and the ids and action its handler
    /// added): in Redis (awaited, so that an action answered is an action recorded) and in
    /// the log. A failure to record is logged, and does not change the answer.
    pub fn finish(self, state: &AppState, response: &Response) -> impl Future<Output = ()> {
        // (What is needed of the response is taken now: a borrow of it would make the
        // future not Send.)
        let status = response.status();
        let detail = response.extensions().get::<Detail>().cloned();
        let mut ids = self.ids;
        let mut action = self.action.to_owned();
        let mut actor = self.actor;
        if let Some(d) = detail {
            ids.extend(d.ids);
            action = d.action.unwrap_or(action);
            actor = d.actor.unwrap_or(actor);
        }
        let entry = Entry {
            id: String::new(),
            actor,
            via: self.via.to_owned(),
            action,
            queue: self.queue,
            ids,
            from: self.from,
            outcome: outcome_of(status).to_owned(),
            status: status.as_u16(),
        };
        let state = state.clone();
        async move { write(&state, entry).await }
    }
}

/// ok, refused (401, 403) or failed.
fn outcome_of(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200..=399 => "ok",
        401 | 403 => "refused",
        _ => "failed",
    }
}

/// Who an API request is: its token's name; `(no token)`, `(unknown token)`, or when no
/// tokens are configured `(open server)` (`(local cli)` for the CLI's own router).
fn api_actor(state: &AppState, headers: &HeaderMap) -> String {
    let tokens = state.tokens();
    if tokens.is_empty() {
        return match state.audit_via() {
            "cli" => "(local cli)",
            _ => "(open server)",
        }
        .to_owned();
    }
    match crate::auth::bearer(headers) {
        None => "(no token)".to_owned(),
        Some(secret) => match tokens.find(secret.as_bytes()) {
            Some(caller) => caller.name.to_string(),
            None => "(unknown token)".to_owned(),
        },
    }
}

/// Where a request came from: the peer's address, and what a proxy in front says it
/// forwarded for (`X-Forwarded-For`, kept as given; `record.rs` cuts it).
fn from_of(parts: &Parts) -> String {
    let peer = parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip().to_string())
        .unwrap_or_else(|| "(in process)".to_owned());
    match parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
    {
        Some(forwarded) => format!("{peer} (for {forwarded})"),
        None => peer,
    }
}

/// Records what no request did: a reload of the tokens, `why` it was tried (SIGHUP, the file
/// changed) and whether it took.
pub async fn record_reload(state: &AppState, ok: bool, why: &str) {
    let entry = Entry {
        id: String::new(),
        actor: "(server)".to_owned(),
        via: "server".to_owned(),
        action: "tokens_reloaded".to_owned(),
        queue: String::new(),
        ids: vec![why.to_owned()],
        from: String::new(),
        outcome: if ok { "ok" } else { "failed" }.to_owned(),
        status: 0,
    };
    write(state, entry).await;
}
