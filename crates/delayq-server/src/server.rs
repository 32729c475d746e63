//! Running the server: a bound listener, the state, and a shutdown future. Tests bind
//! `127.0.0.1:0` and run it in-process; `main.rs` adds flags, signals and Redis.

use std::future::Future;

use tokio::net::TcpListener;

use crate::state::AppState;

/// Serves the API on `listener` until `shutdown` completes; then stops accepting, answers
/// held long-polls (empty), and returns once every request in progress has finished.
pub async fn run(
    listener: TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let app = crate::api::router(state.clone());
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            state.begin_shutdown();
        })
        .await
}
