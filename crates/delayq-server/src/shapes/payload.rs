//! A payload as every answer shows it: a JSON value as JSON, bytes as base64, never one
//! taken for the other, and never with a message's push envelope.

use base64::Engine;
use delayq::PayloadKind;
use serde::Serialize;
use serde_json::value::RawValue;
use utoipa::ToSchema;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

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
        let payload = match crate::push_envelope::open(&payload) {
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
