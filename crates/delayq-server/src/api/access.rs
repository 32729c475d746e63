//! The role a route needs, checked from the request's head before anything else is
//! extracted: a client without a valid token is answered 401 (or 403) at once, so it never
//! makes the server read, wait for or hold its body.
//!
//! A handler names its role in its arguments, first among them:
//! `_: Authorized<SendRole>`. The marker types are the roles of `auth.rs`, plus
//! [`AnyRole`] for routes any valid token may use.

use std::marker::PhantomData;

use axum::extract::FromRequestParts;
use axum::http::request::Parts;

use crate::auth::Role;
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

/// Proof that the request's token allows `R`; extracting it is the check.
pub struct Authorized<R>(PhantomData<R>);

impl<R: Needs> FromRequestParts<AppState> for Authorized<R> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        match R::ROLE {
            Some(role) => state.authorize(&parts.headers, role)?,
            None => {
                let role = state.tokens().authenticate(&parts.headers)?;
                if !R::MONITOR_TOO && role.is_some_and(|r| !r.reads_messages()) {
                    return Err(ApiError::new(
                        axum::http::StatusCode::FORBIDDEN,
                        "forbidden",
                        "a Monitor token reads /metrics and /readyz only",
                    ));
                }
            }
        }
        Ok(Authorized(PhantomData))
    }
}
