//! The `delayq` server and CLI.
