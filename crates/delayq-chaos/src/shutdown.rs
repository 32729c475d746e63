//! How a process of the run hears that it should stop: SIGTERM (the controller's graceful
//! stop) or Ctrl-C.

/// Completes on SIGTERM (or Ctrl-C).
pub async fn sigterm() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        // Without a handler, SIGTERM kills the process anyway.
        Err(_) => std::future::pending().await,
    }
}
