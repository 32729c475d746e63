//! The role a route needs, and the queue it names, checked from the request's head before
//! anything else is extracted: a client without a valid token is answered 401 (or 403) at
//! once, so it never makes the server read, wait for or hold its body.
//!
//! A handler names its role in its arguments, first among them:
//! `_: Authorized<SendRole>`. The marker types are the roles of `auth/mod.rs`, plus
//! [`AnyRole`] for routes any valid token may use. A route whose path names a queue
//! (`{queue}`) is refused (403 `out_of_scope`) to a token scoped to other queues, the same
//! whether that queue exists or not; a route that lists or reads several queues asks
//! [`Authorized::caller`] which it may show.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::{in_scope, out_of_scope, queue_out_of_scope, Caller, Role};
use crate::error::ApiError;
use crate::state::AppState;

/// What a route needs: a role, or (`None`) any valid token.
pub trait Needs {
    /// The role; `None` for any token.
    const ROLE: Option<Role>;
    /// With `ROLE` `None`: whether a monitor's token may too.
    const MONITOR_TOO: bool = false;
}

/// Send, get, cancel, reschedule.
pub struct SendRole;
/// Receive and settle.
pub struct ConsumeRole;
/// Everything else.
pub struct AdminRole;
/// `/metrics`: a monitor's token, or an admin's.
pub struct MonitorRole;
/// Any valid token but a monitor's (reads every role that works with messages may do:
/// lists, events, the OpenAPI document).
pub struct AnyRole;
/// Any valid token at all (`/readyz`).
pub struct ProbeRole;

impl Needs for SendRole {
    const ROLE: Option<Role> = Some(Role::Send);
}
impl Needs for ConsumeRole {
    const ROLE: Option<Role> = Some(Role::Consume);
}
impl Needs for AdminRole {
    const ROLE: Option<Role> = Some(Role::Admin);
}
impl Needs for MonitorRole {
    const ROLE: Option<Role> = Some(Role::Monitor);
}
impl Needs for AnyRole {
    const ROLE: Option<Role> = None;
}
impl Needs for ProbeRole {
    const ROLE: Option<Role> = None;
    const MONITOR_TOO: bool = true;
}

/// Proof that the request's token allows `R`, and the queue its path names; extracting it
/// is the check.
pub struct Authorized<R> {
    caller: Option<Caller>,
    role: PhantomData<R>,
}

impl<R> Authorized<R> {
    /// Who the request is (`None` when auth is off: every queue).
    pub fn caller(&self) -> Option<&Caller> {
        self.caller.as_ref()
    }

    /// Whether the request's token may touch queue `name`.
    pub fn may_use(&self, name: &str) -> bool {
        in_scope(self.caller(), name)
    }

    /// 403 `out_of_scope` unless the request's token may touch every queue (what concerns
    /// no queue in particular: the processes, a cross-queue change).
    pub fn every_queue(&self) -> Result<(), ApiError> {
        match self.caller() {
            Some(c) if !c.scope.is_every_queue() => Err(out_of_scope()),
            _ => Ok(()),
        }
    }
}

impl<R: Needs> FromRequestParts<AppState> for Authorized<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let caller = match R::ROLE {
            Some(role) => state.authorize(&parts.headers, role)?,
            None => {
                let caller = state.tokens().authenticate(&parts.headers)?;
                if !R::MONITOR_TOO && caller.as_ref().is_some_and(|c| !c.role.reads_messages()) {
                    return Err(ApiError::new(
                        axum::http::StatusCode::FORBIDDEN,
                        "forbidden",
                        "a Monitor token reads /metrics and /readyz only",
                    ));
                }
                caller
            }
        };
        if let Some(c) = &caller {
            tracing::Span::current().record("delayq.token", &*c.name);
            // A name out of scope, valid or not, existing or not, gets the same answer.
            if let Some(queue) = queue_out_of_scope(parts, c).await {
                tracing::info!(token = %c.name, queue, "refused: a queue out of the token's scope");
                return Err(out_of_scope());
            }
        }
        Ok(Authorized {
            caller,
            role: PhantomData,
        })
    }
}
