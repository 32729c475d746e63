//! Who may see a dashboard page: a visitor with a valid session cookie.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};

use super::session::{self, Session};
use crate::state::AppState;

/// A visitor with a valid session. A request without one is sent to the login form (a page)
/// or refused (anything else).
pub struct Visitor(pub Session);

impl FromRequestParts<AppState> for Visitor {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Response> {
        match session_of(&parts.headers, state) {
            Some(s) => Ok(Visitor(s)),
            None if parts.method == axum::http::Method::GET => {
                Err(Redirect::to("/ui/login").into_response())
            }
            None => Err((StatusCode::UNAUTHORIZED, "log in first").into_response()),
        }
    }
}

/// The session the request's cookie proves, if any (see [`session::verify`]).
pub fn session_of(headers: &axum::http::HeaderMap, state: &AppState) -> Option<Session> {
    let cookies = headers.get(header::COOKIE).and_then(|v| v.to_str().ok());
    session::verify(
        &state.tokens(),
        session::cookie_value(cookies, session::COOKIE),
    )
}
