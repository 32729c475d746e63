//! The `delayq` binary: parses flags and calls the library.

fn main() {}
