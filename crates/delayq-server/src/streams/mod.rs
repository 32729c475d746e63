//! The server's event streams, shared by the API's SSE and the dashboard's feed: one reader
//! per queue whose events every stream of that queue shares (`event_hub.rs`), and the cap on
//! open streams per token and in all (`stream_slots.rs`).

pub mod event_hub;
pub mod stream_slots;
