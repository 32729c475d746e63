//! Payloads as the API answers them (a JSON value as JSON, bytes as base64, never one taken
//! for the other) and a message's error history.

use base64::Engine;
use serde::Serialize;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};
pub use crate::shapes::{EncryptedOut, PayloadOut};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Decodes standard base64; a 400 if it is not.
pub fn decode_base64(text: &str) -> ApiResult<Vec<u8>> {
    B64.decode(text)
        .map_err(|e| ApiError::bad_request("invalid_payload", format!("payload_base64: {e}")))
}

/// A raw request body: the payload bytes as they are (documentation only).
pub struct RawPayload;

impl utoipa::PartialSchema for RawPayload {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .description(Some("The payload bytes"))
            .into()
    }
}

impl ToSchema for RawPayload {}

/// One failed attempt of a message, as `get` and the dead-letter list show its history.
#[derive(Serialize, ToSchema)]
pub struct ErrorOut {
    /// Which delivery failed (0: kept before histories were).
    attempt: u32,
    /// When, ms since the Unix epoch (0: not known).
    at_ms: u64,
    /// What went wrong.
    error: String,
}

/// A message's last few failures, oldest first.
pub fn errors_out(history: Vec<delayq::FailedAttempt>) -> Vec<ErrorOut> {
    history
        .into_iter()
        .map(|e| ErrorOut {
            attempt: e.attempt,
            at_ms: e.at_ms,
            error: e.error,
        })
        .collect()
}
