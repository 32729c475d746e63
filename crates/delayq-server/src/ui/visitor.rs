//! Who may see a dashboard page: a visitor with a valid session cookie, and on a queue's
//! pages (`{queue}` in the path) one whose token's scope takes that queue: any other gets
//! 403, the same whether the queue exists or not.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::session::{self, Session};
use crate::auth::queue_out_of_scope;
use crate::state::AppState;

/// A visitor with a valid session. A request without one is sent to the login form (a page)
/// or refused (anything else).
pub struct Visitor(pub Session);

impl FromRequestParts<AppState> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match session_of(&parts.headers, state).await {
            Some(s) => {
                let out = match &s.caller {
                    Some(caller) => queue_out_of_scope(parts, caller).await.is_some(),
                    None => false,
                };
                match out {
                    true => Err((StatusCode::FORBIDDEN, "this token may not use that queue")
                        .into_response()),
                    false => Ok(Visitor(s)),
                }
            }
            None if parts.method == axum::http::Method::GET => {
                Err(Redirect::to("/ui/login").into_response())
            }
            None => Err((StatusCode::UNAUTHORIZED, "log in first").into_response()),
        }
    }
}

/// The session the request's cookie proves, if any (see [`session::verify`]). None too when
/// the sessions' secret cannot be read (Redis is away): the visitor logs in again later.
pub async fn session_of(headers: &axum::http::HeaderMap, state: &AppState) -> Option<Session> {
    let cookies = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    let tokens = state.tokens();
    let secret = match tokens.is_empty() {
        true => &[][..],
        false => state.session_secret().await.ok()?,
    };
    session::verify(
        &tokens,
        secret,
        session::cookie_value(cookies, session::COOKIE),
    )
}
