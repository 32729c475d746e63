//! The API's errors: one JSON shape, `{"error": {"code": "...", "message": "..."}}`, with a
//! stable code per kind of failure and the HTTP status that goes with it. Bad input is
//! always a 4xx; a Redis that went away is a 503; a 500 means a bug.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use delayq::InvalidInput;
use serde_json::json;

/// Every code the API answers with. `docs/http-api.md` lists each with its status (a test
/// compares the two), and a debug build refuses to make an error with a code not here, so a
/// new code cannot go undocumented.
pub const CODES: &[&str] = &[
    "malformed_json",
    "bad_body",
    "malformed_form",
    "invalid_query",
    "invalid_path",
    "invalid_queue_name",
    "invalid_id",
    "invalid_group",
    "invalid_receipt",
    "invalid_duration",
    "invalid_time",
    "invalid_payload",
    "invalid_option",
    "invalid_schedule",
    "invalid_cursor",
    "invalid_push_target",
    "push_target_refused",
    "push_url_not_allowed",
    "invalid_webhook",
    "webhook_refused",
    "over_limit",
    "empty_batch",
    "unauthorized",
    "forbidden",
    "out_of_scope",
    "host_not_allowed",
    "cross_origin",
    "not_found",
    "no_route",
    "method_not_allowed",
    "body_timeout",
    "lease_lost",
    "wrong_state",
    "queue_not_empty",
    "older_data_format",
    "older_processes",
    "body_too_large",
    "batch_too_large",
    "payload_too_large",
    "unsupported_media_type",
    "too_many_streams",
    "internal",
    "unavailable",
    "redis_full",
    "not_replicated",
    "no_encryption_key",
    "encryption_changed",
    "newer_data_format",
    "server_busy",
];

/// An error as the API answers it.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
}

impl ApiError {
    /// An error with this status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        debug_assert!(CODES.contains(&code), "error code {code:?} is not in CODES");
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// 400: the request is wrong in a way the client must fix.
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    /// 500: the server itself is wrong (never the client's doing).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }

    /// 404: no such message (or dead letter).
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 413: the body, batch or payload is over a limit.
    pub fn too_large(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::PAYLOAD_TOO_LARGE, code, message)
    }

    /// The same error, said of item `index` of a batch.
    pub fn at(mut self, index: usize) -> Self {
        self.message = format!("messages[{index}]: {}", self.message);
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The stable code.
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// What went wrong, in words.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({ "error": { "code": self.code, "message": self.message } });
        (self.status, Json(body)).into_response()
    }
}

impl From<InvalidInput> for ApiError {
    fn from(e: InvalidInput) -> Self {
        let code = match &e {
            InvalidInput::QueueName { .. } => "invalid_queue_name",
            InvalidInput::MessageId { .. } => "invalid_id",
            InvalidInput::Group { .. } => "invalid_group",
            InvalidInput::PayloadTooLarge { .. } => {
                return ApiError::too_large("payload_too_large", e.to_string())
            }
            InvalidInput::Receipt { .. } => "invalid_receipt",
            InvalidInput::Schedule(_) => "invalid_schedule",
            _ => "invalid_option",
        };
        ApiError::bad_request(code, e.to_string())
    }
}

impl From<delayq::Error> for ApiError {
    fn from(e: delayq::Error) -> Self {
        match e {
            delayq::Error::Invalid(invalid) => invalid.into(),
            delayq::Error::LeaseLost { .. } => {
                ApiError::new(StatusCode::CONFLICT, "lease_lost", e.to_string())
            }
            delayq::Error::WrongState { .. } => {
                ApiError::new(StatusCode::CONFLICT, "wrong_state", e.to_string())
            }
            delayq::Error::NotFound { .. } => ApiError::not_found(e.to_string()),
            delayq::Error::NotEmpty { .. } => {
                ApiError::new(StatusCode::CONFLICT, "queue_not_empty", e.to_string())
            }
            delayq::Error::NotReplicated { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "not_replicated",
                e.to_string(),
            ),
            // The queue encrypts and this server was started without --keys-file: nothing
            // was written; the operator gives it the keys.
            delayq::Error::NoKey { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "no_encryption_key",
                e.to_string(),
            ),
            // The queue's encryption changed twice while a send ran: nothing was written.
            delayq::Error::EncryptionChanged { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "encryption_changed",
                e.to_string(),
            ),
            // This server is older than the queue's data: refused until it is upgraded.
            delayq::Error::NewerFormat { .. } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "newer_data_format",
                e.to_string(),
            ),
            // A feature the queue's data format does not have yet (groups before format 3):
            // the operator upgrades the queue; nothing was written.
            delayq::Error::FormatTooOld { .. } => {
                ApiError::new(StatusCode::CONFLICT, "older_data_format", e.to_string())
            }
            // An upgrade while older processes run: they are named; nothing was changed.
            delayq::Error::OlderProcesses { .. } => {
                ApiError::new(StatusCode::CONFLICT, "older_processes", e.to_string())
            }
            ref redis if redis.is_retryable() => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("Redis is unavailable: {redis}"),
            ),
            ref full if full.is_out_of_memory() => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "redis_full",
                "Redis is out of memory (maxmemory): sends are refused until it is drained",
            ),
            other => {
                tracing::error!(error = %other, "unexpected failure");
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    other.to_string(),
                )
            }
        }
    }
}

/// The shape of every error answer, for the OpenAPI document.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    error: ErrorDetail,
}

/// What went wrong.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `malformed_json`, `invalid_id`, `lease_lost`, ...
    code: String,
    /// For people.
    message: String,
}

/// Shorthand for handler results.
pub type ApiResult<T> = Result<T, ApiError>;
