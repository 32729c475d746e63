//! The scripts against a real Redis: calls made malformed on purpose, and records with
//! fields of a later delayq.

mod extension;
mod malformed;
