//! A server per test: a fresh redis-server, the delayq server on a free port, and an HTTP
//! client that speaks to it.

#![allow(dead_code)] // each test module uses its own subset

use std::future::Future;
use std::time::Duration;

use delayq::{Config, DelayQ};
use delayq_server::auth::Tokens;
use delayq_server::limits::Limits;
use delayq_server::state::AppState;
pub use redis_fixture::{RedisServer, ServerConfig};
use reqwest::{Method, StatusCode};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// A running server and the Redis it runs on (its own). Everything else is its
/// [`Endpoint`]'s.
pub struct TestServer {
    pub redis: RedisServer,
    endpoint: Endpoint,
}

/// A running in-process server: where it listens, and how to stop it.
pub struct Endpoint {
    pub base: String,
    pub http: reqwest::Client,
    /// The bearer token sent with every request, if any.
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

/// A client config with short timeouts, so that a Redis that went away is a quick 503.
pub fn client_config() -> Config {
    Config::default().response_timeout(Duration::from_secs(1))
}

impl TestServer {
    pub async fn start() -> TestServer {
        Self::start_with(Limits::default(), Tokens::default()).await
    }

    pub async fn start_with(limits: Limits, tokens: Tokens) -> TestServer {
        Self::start_on(RedisServer::start(), limits, tokens).await
    }

    /// A server on a Redis the test started (with the config it needs).
    pub async fn start_on(redis: RedisServer, limits: Limits, tokens: Tokens) -> TestServer {
        let endpoint = Endpoint::start(&redis.url(), limits, tokens).await;
        TestServer { redis, endpoint }
    }

    /// A server whose client seals and opens payloads with `keys` (as `--keys-file` gives).
    pub async fn start_keyed(keys: delayq::Keyring, limits: Limits, tokens: Tokens) -> TestServer {
        let redis = RedisServer::start();
        let config = client_config().keys(keys);
        let endpoint = Endpoint::start_with(&redis.url(), limits, tokens, config).await;
        TestServer { redis, endpoint }
    }

    /// A second server on this one's Redis.
    pub async fn start_beside(&self, limits: Limits) -> Endpoint {
        Endpoint::start(&self.redis.url(), limits, Tokens::default()).await
    }

    /// Stops the server gracefully and waits for it.
    pub async fn shutdown(self) {
        self.endpoint.shutdown().await;
    }

    /// Waits for the server task after `begin_shutdown`.
    pub async fn join(self) {
        self.endpoint.join().await;
    }
}

impl std::ops::Deref for TestServer {
    type Target = Endpoint;

    fn deref(&self) -> &Endpoint {
        &self.endpoint
    }
}

impl std::ops::DerefMut for TestServer {
    fn deref_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }
}

impl Endpoint {
    /// A server on the Redis at `url`, listening on a free loopback port.
    pub async fn start(url: &str, limits: Limits, tokens: Tokens) -> Endpoint {
        Self::start_with(url, limits, tokens, client_config()).await
    }

    /// [`start`](Self::start) with the library client's `config`.
    pub async fn start_with(url: &str, limits: Limits, tokens: Tokens, config: Config) -> Endpoint {
        let dq = DelayQ::connect_with(url, config)
            .await
            .expect("connect to redis");
        let metrics = delayq_server::metrics::install().expect("metrics recorder");
        let state = AppState::new(dq, limits, tokens, Some(metrics));
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("addr"));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(delayq_server::server::run(listener, state, async move {
            let _ = stopped.await;
        }));
        Endpoint {
            base,
            http: http_client(),
            token: None,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Sends `method path` with a JSON body (or none) and returns status and JSON body
    /// (`Value::Null` for an empty body).
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("request");
        read(resp).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    /// `GET path`, its body as text (a page, the metrics).
    pub async fn get_text(&self, path: &str) -> (StatusCode, String) {
        let mut req = self.http.get(format!("{}{path}", self.base));
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.expect("request");
        (resp.status(), resp.text().await.expect("body"))
    }

    /// Stops the server gracefully and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server ran");
        }
    }

    /// Starts a graceful shutdown without waiting for it.
    pub fn begin_shutdown(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits for the server task after `begin_shutdown`.
    pub async fn join(mut self) {
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server ran");
        }
    }
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

pub async fn read(resp: reqwest::Response) -> (StatusCode, Value) {
    let status = resp.status();
    let bytes = resp.bytes().await.expect("body");
    let body = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{status}: body is not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        })
    };
    (status, body)
}

/// A long-poll under way: its answer, and how long it took.
pub type LongPoll = JoinHandle<((StatusCode, Value), std::time::Duration)>;

/// Starts `POST {path}` with `body` (a receive that waits) in a task of its own and returns
/// once Redis has run its claim on `queue` (the first receive of a queue on this server
/// claims before it waits): from then on only a wake-up, or the end of its wait, answers it.
pub async fn long_poll_waiting(s: &TestServer, path: &str, body: Value, queue: &str) -> LongPoll {
    long_poll_claimed(s, path, body, queue, 1).await
}

/// The same, once Redis has run `claims` claims on `queue` (one on each of its partitions).
pub async fn long_poll_claimed(
    s: &TestServer,
    path: &str,
    body: Value,
    queue: &str,
    claims: usize,
) -> LongPoll {
    let mut monitor = s.redis.monitor();
    let (url, http) = (format!("{}{path}", s.base), s.http.clone());
    let polling = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let resp = http.post(url).json(&body).send().await.expect("request");
        (read(resp).await, started.elapsed())
    });
    // Partition 0's keys are `dq:{<queue>}:...`, the others' `dq:{<queue>#<k>.<n>}:...`.
    let (exact, other) = (format!("dq:{{{queue}}}:"), format!("dq:{{{queue}#"));
    tokio::task::spawn_blocking(move || {
        for _ in 0..claims {
            monitor
                .wait_for_any(&["_claim\""], &[&exact, &other], Duration::from_secs(10))
                .expect("the long-poll's claim");
        }
    })
    .await
    .expect("monitor task");
    polling
}

/// The error code of an error answer, after checking its status.
#[track_caller]
pub fn assert_error(answer: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_eq!(answer.0, status, "{}", answer.1);
    assert_eq!(answer.1["error"]["code"], code, "{}", answer.1);
    assert!(answer.1["error"]["message"].is_string(), "{}", answer.1);
}

/// Every key in `redis`, sorted: what a refused request must leave as it found it. Not the
/// registry of processes, where a server announces itself before its first call reaches
/// a queue, nor the audit log, where a refused attempt is recorded on purpose.
pub fn all_keys(redis: &RedisServer) -> Vec<String> {
    let mut keys: Vec<String> = redis
        .cli(&["KEYS", "*"])
        .lines()
        .filter(|k| !NOT_QUEUE_DATA.contains(k))
        .map(str::to_owned)
        .collect();
    keys.sort();
    keys
}

/// Keys of delayq's that hold no queue's data: the processes' announcements and the audit log.
const NOT_QUEUE_DATA: [&str; 2] = ["dq:processes", "dq:audit"];

/// Every key of delayq's with its `DUMP`, sorted, but for those of [`NOT_QUEUE_DATA`].
pub fn queue_data_dumped(redis: &RedisServer) -> Vec<(String, String)> {
    let mut dumped = redis.every_key_dumped("dq:*");
    dumped.retain(|(key, _)| !NOT_QUEUE_DATA.contains(&key.as_str()));
    dumped
}

/// Polls `check` until it returns true, failing the test after `limit`.
pub async fn wait_until<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Receives up to `max` deliveries from `queue` with a 30 s lease, waiting up to `wait`.
pub async fn receive(s: &TestServer, queue: &str, max: usize, wait: &str) -> Vec<Value> {
    let (status, body) = s
        .post(
            &format!("/v1/queues/{queue}/receive"),
            serde_json::json!({ "max": max, "lease": "30s", "wait": wait }),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["deliveries"].as_array().cloned().unwrap_or_default()
}

/// An HTTP client for the tests. reqwest is built with rustls but no crypto provider of its
/// own (the server installs ring's, `push/runtime.rs`): install it here too, once.
pub fn http_client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}
