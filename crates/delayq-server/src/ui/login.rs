//! Logging in with an API token, and out. The cookie is HttpOnly (no script reads it),
//! SameSite=Strict (no other site's page sends it) and lasts as long as the session.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use serde::Deserialize;

use super::layout;
use super::session::{self, COOKIE, LIFETIME};
use crate::api::body::FormBody;
use crate::state::AppState;

/// `GET /ui/login`.
pub async fn form(State(state): State<AppState>) -> Response {
    if state.tokens().is_empty() {
        // Nothing to log in with: everyone on loopback is admin.
        return Redirect::to("/ui").into_response();
    }
    login_page(None, StatusCode::OK)
}

fn login_page(error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        div.login {
            h1 { "Log in" }
            @if let Some(e) = error {
                p.notice.error role="alert" { (e) }
            }
            form method="post" action="/ui/login" {
                label for="token" { "API token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus;
                button.primary type="submit" { "Log in" }
            }
            p.muted { "A send or consume token sees the pages; an admin token can also act." }
        }
    };
    (status, layout::page("Log in", None, false, body)).into_response()
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// `; Secure` when the request came over HTTPS, as a proxy in front says
/// (`X-Forwarded-Proto: https`, or `proto=https` in `Forwarded`): the browser then sends the
/// cookie over HTTPS only. Plain HTTP (the default, on loopback) gets none, or the cookie
/// would never come back. A client that lies about it only keeps its own cookie from
/// coming back.
fn secure_attribute(headers: &HeaderMap) -> &'static str {
    let said = |name: &str| {
        headers
            .get_all(name)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .any(|v| {
                v.split([',', ';']).any(|part| {
                    let part = part.trim().to_ascii_lowercase();
                    part == "https" || part == "proto=https"
                })
            })
    };
    if said("x-forwarded-proto") || said("forwarded") {
        "; Secure"
    } else {
        ""
    }
}

/// `POST /ui/login`: a known token gets the cookie; anything else the form again, with 401.
pub async fn submit(
    State(state): State<AppState>,
    headers: HeaderMap,
    FormBody(form): FormBody<LoginForm>,
) -> Response {
    let secret = match state.session_secret().await {
        Ok(secret) => secret,
        Err(e) => return e.into_response(),
    };
    match session::issue(&state.tokens(), secret, &form.token) {
        Some(cookie) => {
            let set = format!(
                "{COOKIE}={cookie}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}{}",
                LIFETIME.as_secs(),
                secure_attribute(&headers)
            );
            ([(header::SET_COOKIE, set)], Redirect::to("/ui")).into_response()
        }
        None => login_page(
            Some("That is not a token of this server."),
            StatusCode::UNAUTHORIZED,
        ),
    }
}

#[derive(Deserialize)]
pub struct LogoutForm {
    csrf: String,
}

/// `POST /ui/logout`: clears the cookie (CSRF-checked, so no other site can log one out).
pub async fn logout(
    State(state): State<AppState>,
    headers: HeaderMap,
    FormBody(form): FormBody<LogoutForm>,
) -> Response {
    let valid = super::visitor::session_of(&headers, &state)
        .await
        .is_some_and(|s| s.csrf_matches(&form.csrf));
    if !valid {
        return (StatusCode::FORBIDDEN, "bad or missing CSRF token").into_response();
    }
    let clear = format!(
        "{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0{}",
        secure_attribute(&headers)
    );
    ([(header::SET_COOKIE, clear)], Redirect::to("/ui/login")).into_response()
}
