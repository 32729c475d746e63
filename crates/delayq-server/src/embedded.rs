//! The embedded Redis: a private, durable `redis-server` that `delayq serve` starts,
//! supervises and stops when it is given no Redis URL.
//!
//! * Its data lives in one directory (`--data-dir`), with AOF on (`appendfsync everysec`, or
//!   `always`) and `maxmemory-policy noeviction`: the settings delayq needs to lose nothing.
//! * It listens on a unix socket in that directory (no TCP port), or on a free loopback port
//!   when the socket path would be too long.
//! * One `serve` per directory: an exclusive lock on `delayq.lock` makes a second one fail
//!   with a clear message instead of two servers writing one AOF.
//! * A `serve` killed outright leaves its Redis running; the next one, holding the lock, knows
//!   that Redis has no owner and stops it (by its pidfile) before starting its own.
//! * If Redis dies, the supervisor starts it again on the same directory and address.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, Command};
use tokio::sync::{watch, Mutex};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Longest time Redis may take to load its data and answer.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long a clean shutdown may take before the process is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Unix socket paths longer than this do not fit `sun_path` (108 bytes with its NUL).
const MAX_SOCKET_PATH: usize = 100;

/// How to run the embedded Redis.
#[derive(Debug, Clone)]
pub struct EmbeddedOptions {
    /// Where its data (AOF), socket, log and lock live; created if missing.
    pub data_dir: PathBuf,
    /// `appendfsync always` (every acknowledged write on disk) instead of `everysec`.
    pub fsync_always: bool,
    /// The `redis-server` binary; by default the one on `PATH`.
    pub redis_server: Option<PathBuf>,
}

/// Why the embedded Redis could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddedError {
    /// No `redis-server` to run.
    #[error(
        "redis-server not found on PATH: install it (Debian/Ubuntu: apt-get install redis-server; \
         macOS: brew install redis) or pass --redis-url to use a Redis you already run"
    )]
    RedisServerMissing,
    /// Another `delayq serve` holds the data directory.
    #[error(
        "another delayq serve already uses {}: stop it, or pass another --data-dir",
        data_dir.display()
    )]
    AlreadyRunning {
        /// The directory.
        data_dir: PathBuf,
    },
    /// Redis did not come up.
    #[error("the embedded redis-server did not start: {reason}\n{log_tail}")]
    Start {
        /// What went wrong.
        reason: String,
        /// The end of its log.
        log_tail: String,
    },
    /// The data directory could not be used.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// With which path.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// A running embedded Redis. Stop it with [`stop`](Self::stop); dropped without that, its
/// process is killed.
pub struct EmbeddedRedis {
    url: String,
    /// Held for as long as this Redis runs: the one-serve-per-directory lock.
    _lock: File,
    child: Arc<Mutex<Option<Child>>>,
    stopping: watch::Sender<bool>,
    supervisor: JoinHandle<()>,
}

impl EmbeddedRedis {
    /// Takes the data directory, stops an orphaned Redis of a crashed `serve` if there is
    /// one, starts Redis and waits until it has loaded its data.
    pub async fn start(options: EmbeddedOptions) -> Result<EmbeddedRedis, EmbeddedError> {
        let binary = find_binary(options.redis_server.as_deref())?;
        let dir = &options.data_dir;
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
        let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
        let lock_path = dir.join("delayq.lock");
        let lock = File::create(&lock_path).map_err(io("cannot create", &lock_path))?;
        if lock.try_lock().is_err() {
            return Err(EmbeddedError::AlreadyRunning { data_dir: dir });
        }
        stop_orphan(&dir).await;

        let socket = dir.join("redis.sock");
        let (address, url) = if socket.as_os_str().len() <= MAX_SOCKET_PATH {
            let url = format!("redis+unix://{}", socket.display());
            (Address::Socket(socket), url)
        } else {
            let port = free_port().map_err(io("cannot find a free port near", &dir))?;
            (Address::Port(port), format!("redis://127.0.0.1:{port}/"))
        };
        let launch = Launch {
            binary,
            args: redis_args(&dir, &address, options.fsync_always),
            dir,
            url: url.clone(),
        };
        let child = launch.spawn_ready().await?;
        let child = Arc::new(Mutex::new(Some(child)));
        let (stopping, stop_rx) = watch::channel(false);
        let supervisor = tokio::spawn(supervise(launch, child.clone(), stop_rx));
        tracing::info!(url = %url, "embedded redis-server ready");
        Ok(EmbeddedRedis {
            url,
            _lock: lock,
            child,
            stopping,
            supervisor,
        })
    }

    /// The URL to reach it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Shuts Redis down cleanly (SIGTERM: it flushes its AOF and exits), killing it if that
    /// takes too long, and releases the data directory.
    pub async fn stop(mut self) -> Result<(), EmbeddedError> {
        self.stopping.send_replace(true);
        if let Some(mut child) = self.child.lock().await.take() {
            terminate(&mut child).await;
        }
        let _ = (&mut self.supervisor).await;
        Ok(())
    }
}

impl Drop for EmbeddedRedis {
    fn drop(&mut self) {
        self.supervisor.abort();
        if let Ok(mut child) = self.child.try_lock() {
            if let Some(child) = child.as_mut() {
                let _ = child.start_kill();
            }
        }
    }
}

enum Address {
    Socket(PathBuf),
    Port(u16),
}

/// Everything needed to start (and restart) the process.
struct Launch {
    binary: PathBuf,
    args: Vec<String>,
    dir: PathBuf,
    url: String,
}

impl Launch {
    /// Starts the process and waits until it serves (its data loaded).
    async fn spawn_ready(&self) -> Result<Child, EmbeddedError> {
        let stderr_path = self.dir.join("redis.stderr");
        let stderr = File::create(&stderr_path).map_err(io("cannot create", &stderr_path))?;
        let mut child = Command::new(&self.binary)
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| self.failed(format!("cannot run {}: {e}", self.binary.display())))?;
        let started = Instant::now();
        let mut last_note = started;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                return Err(self.failed(format!("it exited with {status}")));
            }
            match ping(&self.url).await {
                Ok(true) => return Ok(child),
                Ok(false) if last_note.elapsed() > Duration::from_secs(5) => {
                    tracing::info!(waited = ?started.elapsed(), "embedded redis-server is loading its data");
                    last_note = Instant::now();
                }
                _ => {}
            }
            if started.elapsed() > READY_TIMEOUT {
                let _ = child.start_kill();
                return Err(self.failed(format!("not ready after {READY_TIMEOUT:?}")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn failed(&self, reason: String) -> EmbeddedError {
        EmbeddedError::Start {
            reason,
            log_tail: log_tail(&self.dir),
        }
    }
}

/// Restarts Redis whenever it exits on its own, until told to stop.
async fn supervise(
    launch: Launch,
    child: Arc<Mutex<Option<Child>>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut pause = Duration::from_millis(100);
    loop {
        // Wait for an exit without holding the lock for long, so `stop` can take the child.
        let exited = loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            let mut guard = child.lock().await;
            match guard.as_mut().map(Child::try_wait) {
                Some(Ok(Some(status))) => {
                    guard.take();
                    break status;
                }
                Some(Ok(None)) => {}
                Some(Err(_)) | None => return,
            }
        };
        if *stop.borrow() {
            return;
        }
        tracing::error!(status = %exited, log = %log_tail(&launch.dir), "embedded redis-server exited; starting it again");
        loop {
            tokio::select! {
                _ = stop.wait_for(|s| *s) => return,
                () = tokio::time::sleep(pause) => {}
            }
            match launch.spawn_ready().await {
                Ok(new) => {
                    *child.lock().await = Some(new);
                    pause = Duration::from_millis(100);
                    tracing::info!("embedded redis-server is back");
                    break;
                }
                Err(e) => {
                    tracing::error!(error = %e, "embedded redis-server failed to start again");
                    pause = (pause * 2).min(Duration::from_secs(5));
                }
            }
        }
    }
}

fn redis_args(dir: &Path, address: &Address, fsync_always: bool) -> Vec<String> {
    let mut args: Vec<String> = vec![
        "--dir".into(),
        dir.display().to_string(),
        "--appendonly".into(),
        "yes".into(),
        "--appendfsync".into(),
        if fsync_always { "always" } else { "everysec" }.into(),
        "--maxmemory-policy".into(),
        "noeviction".into(),
        "--save".into(),
        String::new(),
        "--daemonize".into(),
        "no".into(),
        "--logfile".into(),
        dir.join("redis.log").display().to_string(),
        "--pidfile".into(),
        dir.join("redis.pid").display().to_string(),
        "--protected-mode".into(),
        "yes".into(),
    ];
    match address {
        Address::Socket(path) => args.extend([
            "--port".into(),
            "0".into(),
            "--unixsocket".into(),
            path.display().to_string(),
            "--unixsocketperm".into(),
            "700".into(),
        ]),
        Address::Port(port) => args.extend([
            "--port".into(),
            port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
        ]),
    }
    args
}

/// True once Redis answers PONG; false while it answers anything else (`-LOADING`).
async fn ping(url: &str) -> redis::RedisResult<bool> {
    let client = redis::Client::open(url)?;
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(Duration::from_secs(1)))
        .set_response_timeout(Some(Duration::from_secs(1)));
    let mut conn = client
        .get_multiplexed_async_connection_with_config(&config)
        .await?;
    match redis::cmd("PING").query_async::<String>(&mut conn).await {
        Ok(pong) => Ok(pong == "PONG"),
        Err(e) if e.code() == Some("LOADING") => Ok(false),
        Err(e) => Err(e),
    }
}

/// Stops a redis-server left running on `dir` by a `serve` that was killed: the lock we
/// hold proves its owner is gone.
async fn stop_orphan(dir: &Path) {
    let Ok(pid) = std::fs::read_to_string(dir.join("redis.pid")) else {
        return;
    };
    let pid = pid.trim();
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return; // not running
    };
    if !String::from_utf8_lossy(&cmdline).contains("redis-server") {
        return; // the pid was reused by something else
    }
    tracing::warn!(
        pid,
        "stopping the redis-server a crashed delayq serve left running"
    );
    signal(pid, "TERM").await;
    let deadline = Instant::now() + STOP_TIMEOUT;
    while Path::new(&format!("/proc/{pid}")).exists() {
        if Instant::now() > deadline {
            signal(pid, "KILL").await;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A zombie keeps /proc/<pid> until its parent reaps it; it holds no files, so waiting
    // for the socket to be free is enough.
}

/// SIGTERM, a wait for a clean exit, then SIGKILL.
async fn terminate(child: &mut Child) {
    if let Some(pid) = child.id() {
        signal(&pid.to_string(), "TERM").await;
        if tokio::time::timeout(STOP_TIMEOUT, child.wait())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!("embedded redis-server did not stop in time; killing it");
    }
    let _ = child.kill().await;
}

/// Sends a signal by the `kill` command (no unsafe code for libc).
async fn signal(pid: &str, name: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .arg(pid)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await;
}

fn find_binary(given: Option<&Path>) -> Result<PathBuf, EmbeddedError> {
    if let Some(path) = given {
        return if path.is_file() {
            Ok(path.to_path_buf())
        } else {
            Err(EmbeddedError::RedisServerMissing)
        };
    }
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("redis-server"))
                .find(|p| p.is_file())
        })
        .ok_or(EmbeddedError::RedisServerMissing)
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// The last lines of the server's log and stderr, for error messages.
fn log_tail(dir: &Path) -> String {
    let mut out = String::new();
    for name in ["redis.stderr", "redis.log"] {
        if let Ok(text) = std::fs::read_to_string(dir.join(name)) {
            let lines: Vec<&str> = text.lines().collect();
            let tail = &lines[lines.len().saturating_sub(10)..];
            if !tail.is_empty() {
                out.push_str(&format!("--- {name} ---\n{}\n", tail.join("\n")));
            }
        }
    }
    out
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EmbeddedError {
    let path = path.to_path_buf();
    move |source| EmbeddedError::Io { what, path, source }
}
