//! A JSON answer written into a buffer sized for it up front. axum's `Json` starts from 128
//! bytes and grows by doubling, copying the answer about ten times over for a batch's or a
//! receive's 50-200 KB (issue 30: the HTTP path); the routes that answer per message
//! know roughly how large their answer will be.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// `value` as JSON, its buffer `capacity` bytes to start with.
pub struct SizedJson<T> {
    pub value: T,
    pub capacity: usize,
}

impl<T: Serialize> IntoResponse for SizedJson<T> {
    fn into_response(self) -> Response {
        let mut buf = Vec::with_capacity(self.capacity);
        match serde_json::to_writer(&mut buf, &self.value) {
            Ok(()) => (
                [(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                )],
                buf,
            )
                .into_response(),
            Err(e) => {
                tracing::error!(error = %e, "an answer could not be written as JSON");
                StatusCode::INTERNAL_SERVER_ERROR.into_response()
            }
        }
    }
}
