//! The path extractor of every route: axum's, with its rejections (a segment that is not
//! UTF-8, say) answered in the API's JSON error shape and code instead of plain text.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::PathRejection;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Path parameters (`{queue}`, `{id}`), deserialized as axum's `Path` does.
pub struct Path<T>(pub T);

impl<T, S> FromRequestParts<S> for Path<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => Err(rejected(&rejection)),
        }
    }
}

/// The error for a path axum could not take apart: a bad queue name or id is reported as
/// such, whatever made it bad.
fn rejected(rejection: &PathRejection) -> ApiError {
    let key = match rejection {
        PathRejection::FailedToDeserializePathParams(e) => match e.kind() {
            ErrorKind::InvalidUtf8InPathParam { key } => Some(key.as_str()),
            ErrorKind::ParseErrorAtKey { key, .. } => Some(key.as_str()),
            ErrorKind::DeserializeError { key, .. } => Some(key.as_str()),
            _ => None,
        },
        _ => None,
    };
    let code = match key {
        Some("queue") => "invalid_queue_name",
        Some("id") => "invalid_id",
        _ => "invalid_path",
    };
    ApiError::bad_request(code, rejection.body_text())
}
