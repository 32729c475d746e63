//! The JSON shapes that the API, the dashboard, push callbacks and webhooks all answer
//! with, below each of them: a payload ([`PayloadOut`]), an event ([`EventOut`]) and what
//! every answer that shows a message shows of it ([`MessageFields`]).

mod event;
mod message_fields;
mod payload;

pub use event::EventOut;
pub use message_fields::MessageFields;
pub use payload::{EncryptedOut, PayloadOut};
