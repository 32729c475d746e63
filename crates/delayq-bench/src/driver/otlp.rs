//! `run --otlp`: an OTLP receiver in this process that the agents export their spans to
//! (through `OTEL_EXPORTER_OTLP_ENDPOINT`, which they inherit), so that a run measures
//! delayq with tracing on, exporting over a real connection as it would to a collector.

use crate::error::Result;
use otlp_receiver::OtlpReceiver;

/// The receiver and the runtime it runs on, for the whole run.
pub struct Collector {
    receiver: OtlpReceiver,
    // Dropped after the receiver, whose task it runs.
    _runtime: tokio::runtime::Runtime,
}

impl Collector {
    /// Starts the receiver and points the agents started after this at it.
    pub fn start() -> Result<Collector> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()?;
        let receiver = runtime.block_on(OtlpReceiver::start())?;
        // Set before any agent is spawned (this process is single-threaded here); agents
        // inherit it, and `Telemetry::from_env` in each turns its spans on.
        std::env::set_var("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint());
        tracing::info!(endpoint = %receiver.endpoint(), "agents export spans over OTLP");
        Ok(Collector {
            receiver,
            _runtime: runtime,
        })
    }

    /// Spans received so far.
    pub fn spans(&self) -> usize {
        self.receiver.spans().len()
    }
}
