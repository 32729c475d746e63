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

/// A payload stored encrypted (the queue's `encryption`), as an answer tells it: with
/// which key, and whether the payload shown is the one sent.
#[derive(Debug, Serialize, ToSchema)]
pub struct EncryptedOut {
    /// The id of the key that sealed it (null when the stored payload is not one).
    key: Option<String>,
    /// The payload shown is the one sent, opened with this server's key. False in a listing
    /// or a search (which never opens one, nor searches it) and when this server cannot open
    /// it (`error` says why): the payload shown is then empty.
    opened: bool,
    /// Why this server cannot open it: `undecryptable: no key <id>` (its `--keys-file`
    /// lacks the key), or `undecryptable: key <id> does not open it`.
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl EncryptedOut {
    /// What an answer tells of a payload `sealed` says is stored encrypted, if it is.
    pub fn of(sealed: Option<&delayq::Sealed>) -> Option<Self> {
        let sealed = sealed?;
        let key = sealed.key().map(str::to_owned);
        Some(match sealed {
            delayq::Sealed::Opened { .. } => EncryptedOut {
                key,
                opened: true,
                error: None,
            },
            delayq::Sealed::Undecryptable(e) => EncryptedOut {
                key,
                opened: false,
                error: Some(e.to_string()),
            },
            _ => EncryptedOut {
                key,
                opened: false,
                error: None,
            },
        })
    }
}
