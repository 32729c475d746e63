//! The HTTP client the OTLP exporter posts spans with: reqwest (the one the server builds
//! already), run on the application's tokio runtime. The exporter calls it from its own
//! thread, outside any runtime, so each request is spawned onto the runtime the exporter
//! was built in.

use std::future::Future;
use std::pin::Pin;

use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};

/// Posts OTLP requests with reqwest on a tokio runtime.
#[derive(Debug)]
pub(crate) struct OtlpHttp {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl OtlpHttp {
    /// A client on the runtime this is called in.
    pub(crate) fn on_this_runtime(client: reqwest::Client) -> Result<OtlpHttp, String> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "OTLP export must be set up inside a tokio runtime".to_owned())?;
        Ok(OtlpHttp { client, runtime })
    }
}

type Reply = Result<Response<Bytes>, HttpError>;

// `HttpClient` is an `async_trait`; this is the method it expands to.
impl HttpClient for OtlpHttp {
    fn send_bytes<'life0, 'async_trait>(
        &'life0 self,
        request: Request<Bytes>,
    ) -> Pin<Box<dyn Future<Output = Reply> + Send + 'async_trait>>
    where
        'life0: 'async_trait,
        Self: 'async_trait,
    {
        let (parts, body) = request.into_parts();
        let request = self
            .client
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body);
        let task = self.runtime.spawn(async move {
            let response = request.send().await?;
            let status = response.status();
            let headers = response.headers().clone();
            let body = response.bytes().await?;
            Ok::<_, reqwest::Error>((status, headers, body))
        });
        Box::pin(async move {
            let (status, headers, body) = task.await??;
            let mut response = Response::builder().status(status).body(body)?;
            *response.headers_mut() = headers;
            Ok(response)
        })
    }
}
