//! Payloads as the API answers them (a JSON value as JSON, bytes as base64, never one taken
//! for the other) and a message's error history.

use base64::Engine;
use delayq::PayloadKind;
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

use crate::error::{ApiError, ApiResult};

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

/// A payload as answered: JSON as JSON (`payload`), bytes as base64 (`payload_base64`).
#[derive(Debug, Serialize)]
pub enum PayloadOut {
    /// Sent as JSON.
    #[serde(rename = "payload")]
    Json(Box<RawValue>),
    /// Sent as bytes.
    #[serde(rename = "payload_base64")]
    Bytes(String),
}

/// Written by hand: one of `{"payload": <any JSON>}` and `{"payload_base64": "..."}`.
impl utoipa::PartialSchema for PayloadOut {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, SchemaType, Type};
        let json = ObjectBuilder::new()
            .property("payload", serde_json::Value::schema())
            .required("payload");
        let bytes = ObjectBuilder::new()
            .property(
                "payload_base64",
                ObjectBuilder::new()
                    .schema_type(SchemaType::Type(Type::String))
                    .content_encoding("base64"),
            )
            .required("payload_base64");
        OneOfBuilder::new().item(json).item(bytes).into()
    }
}

impl ToSchema for PayloadOut {}

impl PayloadOut {
    /// The payload of a message of `kind`. A JSON-kind payload that is not valid JSON (it
    /// can only come from another writer) is answered as bytes rather than not at all.
    pub fn new(payload: Vec<u8>, kind: PayloadKind) -> Self {
        // A message's own push destination is not part of its payload.
        let payload = match crate::push::envelope::open(&payload) {
            (Some(_), inner) => inner.to_vec(),
            (None, _) => payload,
        };
        if kind == PayloadKind::Json {
            if let Ok(json) = String::from_utf8(payload.clone())
                .map_err(|_| ())
                .and_then(|text| RawValue::from_string(text).map_err(|_| ()))
            {
                return PayloadOut::Json(json);
            }
        }
        PayloadOut::Bytes(B64.encode(payload))
    }
}

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
