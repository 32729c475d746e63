//! The dashboard's forms as the audit log sees them: each form's handler (`actions.rs`), its
//! answer tagged with the session's token and the action the form asked for
//! (`audit::Detail`), since every form's route says only "act", and the audit log does not
//! read sessions.

use axum::extract::{Path, State};
use axum::response::Response;

use super::actions::{self, ActionForm};
use super::visitor::Visitor;
use crate::api::body::FormBody;
use crate::audit::Detail;
use crate::state::AppState;

/// `POST /ui/queues/{queue}/act` (`actions::queue_action`).
pub async fn queue_action(
    state: State<AppState>,
    visitor: Visitor,
    path: Path<String>,
    form: FormBody<ActionForm>,
) -> Response {
    let detail = detail(&visitor, &form);
    tagged(
        detail,
        actions::queue_action(state, visitor, path, form).await,
    )
}

/// `POST /ui/queues/{queue}/groups/{group}/act` (`actions::group_action`).
pub async fn group_action(
    state: State<AppState>,
    visitor: Visitor,
    path: Path<(String, String)>,
    form: FormBody<ActionForm>,
) -> Response {
    let detail = detail(&visitor, &form);
    tagged(
        detail,
        actions::group_action(state, visitor, path, form).await,
    )
}

/// `POST /ui/queues/{queue}/messages/{id}/act` (`actions::message_action`).
pub async fn message_action(
    state: State<AppState>,
    visitor: Visitor,
    path: Path<(String, String)>,
    form: FormBody<ActionForm>,
) -> Response {
    let detail = detail(&visitor, &form);
    tagged(
        detail,
        actions::message_action(state, visitor, path, form).await,
    )
}

/// The audit log's name of a form's action: `dashboard:<action>`. The action comes from the
/// visitor's form: anything but a short name of `a-z` and `_` is `dashboard:other`, so that
/// a form cannot write what it likes into the log.
fn tag(action: &str) -> String {
    let plain = !action.is_empty()
        && action.len() <= 32
        && action.bytes().all(|b| b.is_ascii_lowercase() || b == b'_');
    match plain {
        true => format!("dashboard:{action}"),
        false => "dashboard:other".to_owned(),
    }
}

/// Who (the session's token) and what (the form's action), for the audit log.
fn detail(visitor: &Visitor, form: &FormBody<ActionForm>) -> Detail {
    let actor = match &visitor.0.caller {
        Some(caller) => caller.name.to_string(),
        None => "(open server)".to_owned(),
    };
    Detail {
        actor: Some(actor),
        action: Some(tag(&form.0.action)),
        ids: Vec::new(),
    }
}

fn tagged(detail: Detail, mut response: Response) -> Response {
    response.extensions_mut().insert(detail);
    response
}
