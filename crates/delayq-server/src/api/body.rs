//! Reading request bodies, after the route's role was checked (`access.rs`), within a size
//! and a time limit, and of the type the route takes:
//!
//! * [`Body`]: a message payload of any content type (a raw send), up to the payload limit.
//! * [`JsonPayload`]: JSON carrying payloads (a batch, a schedule), up to the payload limit.
//! * [`JsonBody`]: JSON that never carries a payload (receipts, settings, filters), up to the
//!   small control limit, so that no such route makes the server hold megabytes.
//! * [`FormBody`]: a dashboard form (`application/x-www-form-urlencoded`), up to
//!   [`FORM_LIMIT`]: a token, a CSRF token and a few fields.
//!
//! A JSON route refuses any other content type with 415: a web page can make a browser send
//! a form or `text/plain` body anywhere without asking first, but not `application/json`.
//! A body over its limit is a 413 (from its `Content-Length` alone, when it gives one, before
//! a byte of it is read). The deadline and the budget of bytes in flight hold for every body
//! (`body_guard.rs`); here they become a 408 and a 503.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::body_guard::BodyRefused;
use crate::error::{ApiError, ApiResult};

/// Largest dashboard form: the longest form (a queue's settings) is well under 1 KiB.
pub const FORM_LIMIT: usize = 8 * 1024;

/// How bodies are read (a request extension set by the router from the server's limits).
#[derive(Debug, Clone, Copy)]
pub struct BodyRules {
    /// Largest body of a route that carries payloads.
    pub payload_limit: usize,
    /// Largest body of a route that does not.
    pub control_limit: usize,
}

/// A payload route's body, of any content type.
pub struct Body(pub Bytes);

/// A payload route's JSON body (or an empty one).
pub struct JsonPayload(pub Bytes);

/// A control route's JSON body (or an empty one).
pub struct JsonBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        read(req, |r| r.payload_limit, false).await.map(Body)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonPayload {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        read(req, |r| r.payload_limit, true).await.map(JsonPayload)
    }
}

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        read(req, |r| r.control_limit, true).await.map(JsonBody)
    }
}

/// A dashboard form's fields.
pub struct FormBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for FormBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, _: &S) -> Result<Self, ApiError> {
        let is_form = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| {
                v.trim()
                    .eq_ignore_ascii_case("application/x-www-form-urlencoded")
            });
        if !is_form {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "this route takes a form: application/x-www-form-urlencoded",
            ));
        }
        let bytes = read(req, |_| FORM_LIMIT, false).await?;
        serde_urlencoded::from_bytes(&bytes)
            .map(FormBody)
            .map_err(|e| ApiError::bad_request("malformed_form", e.to_string()))
    }
}

async fn read(
    req: Request,
    limit_of: fn(&BodyRules) -> usize,
    json_only: bool,
) -> ApiResult<Bytes> {
    let rules = req
        .extensions()
        .get::<BodyRules>()
        .copied()
        .ok_or_else(|| ApiError::internal("body rules missing"))?;
    let limit = limit_of(&rules);
    let announced = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > limit as u64) {
        return Err(too_large(limit));
    }
    if json_only && announced != Some(0) && !is_json(req.headers()) && has_content_type(&req) {
        return Err(not_json());
    }
    let json_needed = json_only && !is_json(req.headers());
    let bytes = match Limited::new(req.into_body(), limit).collect().await {
        Ok(body) => body.to_bytes(),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => return Err(too_large(limit)),
        Err(e) => return Err(refused(e.as_ref())),
    };
    // A body sent with no content type at all (as a browser's fetch of a bare blob does) is
    // refused too, once it turns out not to be empty.
    if json_needed && !bytes.is_empty() {
        return Err(not_json());
    }
    Ok(bytes)
}

fn has_content_type(req: &Request) -> bool {
    req.headers().contains_key(header::CONTENT_TYPE)
}

/// True for `application/json` and `application/<anything>+json`, with any parameters.
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase())
        .is_some_and(|v| {
            v == "application/json" || (v.starts_with("application/") && v.ends_with("+json"))
        })
}

/// Why reading a body failed, as an answer: the deadline and the budget of `body_guard.rs`,
/// or a body that broke off.
fn refused(error: &(dyn std::error::Error + 'static)) -> ApiError {
    match BodyRefused::find(error) {
        Some(e @ BodyRefused::Deadline(_)) => {
            ApiError::new(StatusCode::REQUEST_TIMEOUT, "body_timeout", e.to_string())
        }
        Some(e @ BodyRefused::Busy) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_busy",
            e.to_string(),
        ),
        None => ApiError::bad_request("bad_body", error.to_string()),
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::too_large(
        "body_too_large",
        format!("the request body is over this route's limit of {limit} bytes"),
    )
}

fn not_json() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "this route takes a JSON body: send it with content-type: application/json",
    )
}

/// Parses a JSON body; an empty body is `{}`.
pub fn parse<T: for<'de> Deserialize<'de>>(body: &[u8]) -> ApiResult<T> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        body
    };
    serde_json::from_slice(body).map_err(|e| ApiError::bad_request("malformed_json", e.to_string()))
}
