//! The query-string extractor of every route: axum's, with its rejections (a missing or
//! unknown parameter, a number that is not one) answered in the API's JSON error shape
//! instead of plain text.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// Query parameters, deserialized as axum's `Query` does.
pub struct Query<T>(pub T);

impl<T, S> FromRequestParts<S> for Query<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(ApiError::bad_request(
                "invalid_query",
                rejection.body_text(),
            )),
        }
    }
}
