//! Exporting spans over OTLP/HTTP (protobuf), to an OpenTelemetry Collector, Jaeger, Tempo
//! or any OTLP receiver.

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};
use opentelemetry_sdk::Resource;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetryLayer;
use tracing_subscriber::registry::LookupSpan;

use super::http_client::OtlpHttp;
use super::spans;

/// How long one export may take before it is given up.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(10);

/// Why tracing could not be set up.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    /// The endpoint is not an `http://` or `https://` URL.
    #[error("OTLP endpoint {0:?} is not an http:// or https:// URL")]
    Endpoint(String),
    /// The exporter could not be built, or flushing or shutting it down failed.
    #[error("OTLP exporter: {0}")]
    Exporter(String),
}

/// Span export over OTLP/HTTP: build one at start-up, add its [`layer`](Self::layer) to
/// the `tracing` subscriber, and [`shutdown`](Self::shutdown) before exit so the last spans
/// are sent. Building one turns delayq's spans on.
///
/// ```no_run
/// use tracing_subscriber::prelude::*;
/// # async fn demo() -> Result<(), delayq::telemetry::TelemetryError> {
/// let telemetry = delayq::telemetry::Telemetry::otlp("http://127.0.0.1:4318", "billing")?;
/// tracing_subscriber::registry().with(telemetry.layer()).init();
/// // ... send, run workers ...
/// telemetry.shutdown().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Telemetry {
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Exports to the OTLP/HTTP receiver at `endpoint`, a base URL as
    /// `OTEL_EXPORTER_OTLP_ENDPOINT` spells it (spans go to `{endpoint}/v1/traces`), naming
    /// this process `service_name`. Call it inside the tokio runtime that will run the
    /// application: exports run on it. Sets the global tracer provider.
    pub fn otlp(endpoint: &str, service_name: &str) -> Result<Telemetry, TelemetryError> {
        let base = endpoint.trim_end_matches('/');
        let scheme_ok = base.starts_with("http://") || base.starts_with("https://");
        if !scheme_ok || reqwest::Url::parse(base).is_err() {
            return Err(TelemetryError::Endpoint(endpoint.to_owned()));
        }
        // reqwest's rustls needs a crypto provider for https endpoints; ring is the one the
        // workspace builds. Installing it is a no-op when one is installed already.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(EXPORT_TIMEOUT)
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let http = OtlpHttp::on_this_runtime(client).map_err(TelemetryError::Exporter)?;
        let exporter = SpanExporter::builder()
            .with_http()
            .with_endpoint(format!("{base}/v1/traces"))
            .with_timeout(EXPORT_TIMEOUT)
            .with_http_client(http)
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        let resource = Resource::builder()
            .with_service_name(service_name.to_owned())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        opentelemetry::global::set_tracer_provider(provider.clone());
        spans::enable();
        Ok(Telemetry { provider })
    }

    /// [`otlp`](Self::otlp) to the endpoint in `OTEL_EXPORTER_OTLP_ENDPOINT`, or `None`
    /// when it is unset or empty (tracing stays off).
    pub fn from_env(service_name: &str) -> Result<Option<Telemetry>, TelemetryError> {
        match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
            Ok(endpoint) if !endpoint.trim().is_empty() => {
                Self::otlp(endpoint.trim(), service_name).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// The `tracing` layer that turns `tracing` spans (delayq's `process` span and the
    /// application's own) into exported OpenTelemetry spans.
    pub fn layer<S>(&self) -> OpenTelemetryLayer<S, SdkTracer>
    where
        S: Subscriber + for<'span> LookupSpan<'span>,
    {
        tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer("delayq"))
            // Per span, each of these costs a clock reading or an allocation on every
            // enter and exit (a span per message): busy and idle time, and the thread.
            .with_tracked_inactivity(false)
            .with_threads(false)
    }

    /// Sends every span ended so far.
    pub async fn flush(&self) -> Result<(), TelemetryError> {
        let provider = self.provider.clone();
        // The provider blocks until its exporter, which runs on this runtime, is done.
        tokio::task::spawn_blocking(move || provider.force_flush())
            .await
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?
            .map_err(|e| TelemetryError::Exporter(e.to_string()))
    }

    /// Sends what is left and stops exporting.
    pub async fn shutdown(self) -> Result<(), TelemetryError> {
        let provider = self.provider;
        tokio::task::spawn_blocking(move || provider.shutdown())
            .await
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?
            .map_err(|e| TelemetryError::Exporter(e.to_string()))
    }
}
