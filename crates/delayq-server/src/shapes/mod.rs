//! The JSON shapes that the API, the dashboard, push callbacks and webhooks all answer
//! with, below each of them: a payload ([`PayloadOut`]) and an event ([`EventOut`]).

mod event;
mod payload;

pub use event::EventOut;
pub use payload::PayloadOut;
