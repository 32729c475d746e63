//! Shared test helpers: a server per test, a connected client, and waiting on conditions.

#![allow(dead_code)] // each test module uses its own subset

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use delayq::{Config, DelayQ, MissedTicks, Queue, Recurrence, SendOptions};
pub use redis_fixture::{RedisServer, ServerConfig};

/// A fresh server and a client connected to it.
pub async fn setup() -> (RedisServer, DelayQ) {
    setup_with(ServerConfig::default()).await
}

pub async fn setup_with(config: ServerConfig) -> (RedisServer, DelayQ) {
    let server = RedisServer::start_with(config);
    let dq = DelayQ::connect_with(&server.url(), Config::default())
        .await
        .expect("connect to the test server");
    (server, dq)
}

/// A proxy in front of `server`, a client through it that gives up on a reply after
/// 200 ms (so that a held reply is a lost one), and a client straight to `server` for
/// looking on.
pub async fn behind_proxy(server: &RedisServer) -> (redis_fixture::Proxy, DelayQ, DelayQ) {
    let proxy = redis_fixture::Proxy::start(server.port());
    let config = Config::default().response_timeout(Duration::from_millis(200));
    let dq = DelayQ::connect_with(&proxy.url(), config)
        .await
        .expect("connect through the proxy");
    let direct = DelayQ::connect(&server.url()).await.expect("connect");
    (proxy, dq, direct)
}

/// A client of `cluster`, connected through its first node.
pub async fn cluster_client(cluster: &redis_fixture::RedisCluster) -> DelayQ {
    DelayQ::connect_cluster(&[&cluster.urls()[0]], Config::default())
        .await
        .expect("connect to the cluster")
}

pub fn queue(dq: &DelayQ, name: &str) -> Queue {
    dq.queue(name).expect("valid queue name")
}

/// This host's clock in ms (the test server runs on the same host).
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_millis() as u64
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

/// A worker running in a task of its own, with the handle to shut it down.
pub struct RunningWorker {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<delayq::Result<delayq::worker::StopReason>>,
}

/// Runs `worker` in a spawned task until it is stopped (or aborted).
pub fn spawn_worker<H, Fut, E>(worker: delayq::worker::Worker<H>) -> RunningWorker
where
    H: Fn(delayq::Delivery) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    RunningWorker {
        stop: Some(stop),
        task,
    }
}

impl RunningWorker {
    /// Asks for a graceful shutdown without waiting for it.
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }

    /// Waits for the worker to stop and returns why it stopped.
    pub async fn join(self) -> delayq::worker::StopReason {
        self.task
            .await
            .expect("worker task did not panic")
            .expect("worker ran without error")
    }

    /// Asks for a graceful shutdown and returns why the worker stopped.
    pub async fn shutdown(mut self) -> delayq::worker::StopReason {
        self.stop();
        self.join().await
    }

    /// Drops the running worker without any shutdown, as a crash of its task would.
    pub async fn abort(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}

/// True when the queue holds nothing at all: every message was acked or cancelled.
pub async fn is_empty(q: &Queue) -> bool {
    is_empty_stats(&q.stats().await.expect("stats"))
}

/// Stats of a queue with no message and no setting, whatever the format of its data.
pub fn is_empty_stats(s: &delayq::Stats) -> bool {
    let mut empty = delayq::Stats::default();
    empty.data_format = s.data_format;
    *s == empty
}

/// Receive options: up to `max` messages, each under `lease`, waiting up to `wait`.
pub fn receiving(max: usize, lease: Duration, wait: Duration) -> delayq::ReceiveOptions {
    delayq::ReceiveOptions { max, lease, wait }
}

/// Receives exactly one message under `lease`, waiting up to 5 s for it.
pub async fn receive_one(consumer: &mut delayq::Consumer, lease: Duration) -> delayq::Delivery {
    let mut got = consumer
        .receive(&receiving(1, lease, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(got.len(), 1, "expected one delivery within 5 s");
    got.remove(0)
}

/// The queue's counts as `[delayed, ready, in_flight, dead]`.
pub async fn counts(q: &Queue) -> [u64; 4] {
    let s = q.stats().await.expect("stats");
    [s.delayed, s.ready, s.in_flight, s.dead]
}

/// Consumers listening for wake-ups on queue `name`: subscribed to its wake channel (or, in
/// the BLPOP design this replaced, blocked on its wake list).
pub fn listening(server: &RedisServer, name: &str) -> u64 {
    let channel = format!("dq:{{{name}}}:wake");
    let subscribers = server
        .cli(&["PUBSUB", "SHARDNUMSUB", &channel])
        .lines()
        .nth(1)
        .and_then(|n| n.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let blocked = server
        .cli(&["INFO", "clients"])
        .lines()
        .find_map(|l| l.trim().strip_prefix("blocked_clients:"))
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    subscribers + blocked
}

/// Makes every lease of queue `name` expired now, as if its holders had stalled past it.
pub fn expire_all_leases(server: &RedisServer, name: &str) {
    server.cli(&[
        "EVAL",
        "local m = redis.call('ZRANGE', KEYS[1], 0, -1) \
         for _, x in ipairs(m) do redis.call('ZADD', KEYS[1], 'XX', 1, x) end return #m",
        "1",
        &format!("dq:{{{name}}}:leases"),
    ]);
}

/// Log lines of the whole test binary (every thread, every runtime), captured by a global
/// subscriber installed on first use. Tests tell their lines apart by queue name.
pub fn global_logs() -> &'static GlobalLogs {
    use tracing_subscriber::util::SubscriberInitExt;
    static LOGS: std::sync::OnceLock<GlobalLogs> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let logs = GlobalLogs::default();
        let writer = logs.clone();
        let _ = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_max_level(tracing_subscriber::filter::LevelFilter::WARN)
            .finish()
            .try_init();
        logs
    })
}

#[derive(Clone, Default)]
pub struct GlobalLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for GlobalLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl GlobalLogs {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lines that name queue `name`.
    pub fn for_queue(&self, name: &str) -> Vec<String> {
        let field = format!("queue={name}");
        String::from_utf8_lossy(&self.lock())
            .lines()
            .filter(|l| l.split_whitespace().any(|w| w == field))
            .map(str::to_owned)
            .collect()
    }
}

/// Ids seen by handlers, shared with the test.
#[derive(Clone, Default)]
pub struct Seen(std::sync::Arc<std::sync::Mutex<std::collections::HashSet<String>>>);

impl Seen {
    pub fn insert(&self, id: &str) {
        self.0.lock().expect("seen lock").insert(id.to_owned());
    }

    pub fn contains_all<'a>(&self, ids: impl IntoIterator<Item = &'a String>) -> bool {
        let seen = self.0.lock().expect("seen lock");
        ids.into_iter().all(|id| seen.contains(id))
    }

    /// The ids seen so far.
    pub fn ids(&self) -> std::collections::HashSet<String> {
        self.0.lock().expect("seen lock").clone()
    }
}

/// Runs a worker from `builder` whose handler only records each delivery's id (and acks).
pub fn spawn_recording_worker(builder: delayq::worker::WorkerBuilder) -> (RunningWorker, Seen) {
    let seen = Seen::default();
    let worker = builder
        .build({
            let seen = seen.clone();
            move |d: delayq::Delivery| {
                let seen = seen.clone();
                async move {
                    seen.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    (spawn_worker(worker), seen)
}

/// What one claim of up to `max` hands out now (waiting for nothing), under a 30 s lease.
pub async fn claim(q: &Queue, max: usize) -> Vec<delayq::Delivery> {
    let mut consumer = q.consumer().await.expect("consumer");
    consumer
        .receive(&receiving(max, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive")
}

/// The payloads of `deliveries`, as text.
pub fn payloads(deliveries: &[delayq::Delivery]) -> Vec<String> {
    deliveries
        .iter()
        .map(|d| String::from_utf8_lossy(&d.payload).into_owned())
        .collect()
}

/// Queue `name` holding one message, its data stamped `format` as a queue of an older
/// release is (its processes still running, say), seen by a client that connects after;
/// and its keys as they are then, to check that a refused send wrote nothing.
pub async fn queue_of_format(
    server: &RedisServer,
    name: &str,
    format: u32,
) -> (Queue, Vec<(String, String)>) {
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    queue(&dq, name)
        .send(b"plain", &delayq::SendOptions::new())
        .await
        .expect("send");
    let control = format!("dq:{{{name}}}:control");
    server.cli(&["HSET", &control, "format", &format.to_string()]);
    let before = server.every_key_dumped(&format!("dq:{{{name}}}*"));
    let dq = DelayQ::connect(&server.url()).await.expect("connect");
    (queue(&dq, name), before)
}

/// How many calls of `command` (as `INFO commandstats` names it: `fcall`, `function|load`)
/// `server` ran since its stats were reset.
pub fn command_calls(server: &RedisServer, command: &str) -> u64 {
    server.command_calls(command)
}

/// Puts schedule `hourly` on `q`, its messages' payload `payload`.
pub async fn put_hourly(q: &Queue, payload: &[u8]) {
    let every_hour = Recurrence::interval(Duration::from_secs(3600), 0).expect("interval");
    q.schedules()
        .put(
            "hourly",
            every_hour,
            MissedTicks::Skip,
            payload,
            &SendOptions::new(),
        )
        .await
        .expect("schedule");
}

/// What `q` delivers, until `n` messages or 10 s: they stay in flight.
pub async fn drain(q: &Queue, n: usize) -> Vec<delayq::Delivery> {
    let mut consumer = q.consumer().await.expect("consumer");
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while got.len() < n && tokio::time::Instant::now() < deadline {
        let batch = consumer
            .receive(&receiving(
                n - got.len(),
                Duration::from_secs(30),
                Duration::from_millis(200),
            ))
            .await
            .expect("receive");
        got.extend(batch);
    }
    got
}
