//! Every Rust sample of the docs, compiled against the library in this crate's tests
//! (`build.rs` takes them out of `docs/*.md`). The samples are fragments, as readers see
//! them; each is wrapped in an async fn given the bindings they assume, and the helpers they
//! call (`close_order`, `mark`, ...) are stubs here. They are compiled, not run: they need
//! a Redis, a collector, a signal.

#[cfg(test)]
#[allow(unused, clippy::all, clippy::unwrap_used, missing_docs)]
mod samples {
    use delayq::{DelayQ, EventCursor, Queue};

    async fn close_order(_payload: &[u8]) -> Result<(), String> {
        Ok(())
    }
    async fn mark(_order: &str, _state: &str) -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }
    async fn save_cursor(_cursor: &EventCursor) -> Result<(), Box<dyn std::error::Error>> {
        Ok(())
    }

    include!(concat!(env!("OUT_DIR"), "/samples.rs"));

    #[test]
    fn every_rust_sample_of_the_docs_compiles() {
        // Compiling this module is the test; this says that the samples were found.
        assert!(SAMPLES >= 7, "only {SAMPLES} Rust samples found in docs/");
    }
}
