//! The embedded Redis: a private, durable server (`redis-server`, or `valkey-server` where
//! only Valkey is installed: `redis-binaries` finds it) that `delayq serve` starts,
//! supervises and stops when it is given no Redis URL.
//!
//! * Its data lives in one directory (`--data-dir`, made private: 0700), with AOF on
//!   (`appendfsync everysec`, or `always`) and `maxmemory-policy noeviction`: the settings
//!   delayq needs to lose nothing.
//! * Its memory is bounded (`maxmemory`, by default half of what the machine or its cgroup
//!   has): when it is full, sends are refused with `OOM` while draining goes on, rather than
//!   the kernel's OOM killer ending Redis.
//! * It listens only on a unix socket (no TCP port, so no other user of the machine can
//!   reach it). When the data directory's path is too long for a socket, the socket lives in
//!   a private directory of this user's (`$XDG_RUNTIME_DIR` or the temp dir), and
//!   `redis.sock` in the data directory links to it.
//! * One `serve` per directory: an exclusive lock on `delayq.lock` makes a second one fail
//!   with a clear message instead of two servers writing one AOF.
//! * A `serve` killed outright leaves its Redis running; the next one, holding the lock, knows
//!   that Redis has no owner and stops it (by its pidfile) before starting its own.
//! * If Redis dies, the supervisor starts it again on the same directory and address.

use std::fs::File;
use std::os::unix::fs::PermissionsExt;
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
    /// The server binary; by default `$DELAYQ_REDIS_SERVER`, else `redis-server`, else
    /// `valkey-server` on `PATH` (`redis-binaries`).
    pub redis_server: Option<PathBuf>,
    /// Its `maxmemory` in bytes; by default [`default_maxmemory`].
    pub maxmemory: Option<u64>,
}

/// Why the embedded Redis could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EmbeddedError {
    /// No server binary to run (neither `redis-server` nor `valkey-server`).
    #[error("{0}; or pass --redis-url to use a server you already run")]
    RedisServerMissing(redis_binaries::NotFound),
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
        let binary = redis_binaries::find_server(options.redis_server.as_deref())
            .map_err(EmbeddedError::RedisServerMissing)?;
        let dir = &options.data_dir;
        std::fs::create_dir_all(dir).map_err(io("cannot create", dir))?;
        let dir = std::fs::canonicalize(dir).map_err(io("cannot resolve", dir))?;
        // It holds every message: no one else on the machine may read it.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))
            .map_err(io("cannot make private", &dir))?;
        let lock_path = dir.join("delayq.lock");
        let lock = File::create(&lock_path).map_err(io("cannot create", &lock_path))?;
        if lock.try_lock().is_err() {
            return Err(EmbeddedError::AlreadyRunning { data_dir: dir });
        }
        stop_orphan(&dir).await;

        let socket = socket_path(&dir)?;
        let url = format!("redis+unix://{}", socket.display());
        let maxmemory = options.maxmemory.unwrap_or_else(default_maxmemory);
        tracing::info!(
            maxmemory,
            "embedded redis-server memory limit (--redis-maxmemory)"
        );
        let launch = Launch {
            binary,
            args: redis_args(&dir, &socket, maxmemory, options.fsync_always),
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

fn redis_args(dir: &Path, socket: &Path, maxmemory: u64, fsync_always: bool) -> Vec<String> {
    vec![
        "--dir".into(),
        dir.display().to_string(),
        "--appendonly".into(),
        "yes".into(),
        "--appendfsync".into(),
        if fsync_always { "always" } else { "everysec" }.into(),
        "--maxmemory".into(),
        maxmemory.to_string(),
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
        "--port".into(),
        "0".into(),
        "--unixsocket".into(),
        socket.display().to_string(),
        "--unixsocketperm".into(),
        "700".into(),
    ]
}

/// Where the socket of the Redis of `dir` (canonical) goes: in `dir` when the path fits a
/// socket address, else in a private directory of its own with a link from `dir`.
fn socket_path(dir: &Path) -> Result<PathBuf, EmbeddedError> {
    let in_dir = dir.join("redis.sock");
    if in_dir.as_os_str().len() <= MAX_SOCKET_PATH {
        return Ok(in_dir);
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(dir, &mut hasher);
    let name = format!("delayq-{:016x}", std::hash::Hasher::finish(&hasher));
    let base = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|b| b.is_dir() && b.join(&name).as_os_str().len() < MAX_SOCKET_PATH - 11)
        .unwrap_or_else(|| PathBuf::from("/tmp"));
    let private = base.join(name);
    make_private_dir(&private, dir)?;
    let socket = private.join("redis.sock");
    // The link lets anything that looks in the data directory (the CLI) find the socket.
    let _ = std::fs::remove_file(&in_dir);
    std::os::unix::fs::symlink(&socket, &in_dir).map_err(io("cannot link", &in_dir))?;
    Ok(socket)
}

/// Makes `path` a directory only its owner may use, or checks that it is one already owned
/// by whoever owns `owner_of`: in a shared temp dir another user could have made it first,
/// to read the socket or to point it elsewhere.
fn make_private_dir(path: &Path, owner_of: &Path) -> Result<(), EmbeddedError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    match std::fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io("cannot create", path)(e)),
    }
    let found = std::fs::symlink_metadata(path).map_err(io("cannot inspect", path))?;
    let owner = std::fs::metadata(owner_of).map_err(io("cannot inspect", owner_of))?;
    if !found.is_dir() || found.uid() != owner.uid() || found.mode() & 0o077 != 0 {
        return Err(io("refusing to use", path)(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            "it is not a private directory of this user's",
        )));
    }
    Ok(())
}

/// Half the memory this process may use: its cgroup's limit if it has one (a systemd
/// unit's `MemoryMax=`, a container's), else the machine's (1 GiB if neither can be read).
/// The other half is for the copy-on-write of an AOF rewrite, the server and everything
/// else on the machine.
pub fn default_maxmemory() -> u64 {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|own| cgroup_limit(&own, Path::new("/sys/fs/cgroup")));
    let machine = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        m.lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    match (cgroup, machine) {
        (Some(c), Some(m)) => c.min(m) / 2,
        (Some(one), None) | (None, Some(one)) => one / 2,
        (None, None) => 1 << 30,
    }
}

/// The memory limit of the cgroup that `own` (this process's `/proc/self/cgroup`) names,
/// under `mount`: the tightest of its own and its parents' (a unit's `MemoryMax=` sits on
/// the unit's cgroup, a slice's on the slice's), on cgroup v2 (`memory.max`) or v1
/// (`memory.limit_in_bytes` of the memory controller). Not the top-level file: a service's
/// limit is on its own cgroup, and the root has none.
fn cgroup_limit(own: &str, mount: &Path) -> Option<u64> {
    // v1 marks "no limit" with a huge number near i64::MAX.
    const UNLIMITED: u64 = 1 << 60;
    let tightest = |dir: PathBuf, top: &Path, file: &str| {
        let mut limit: Option<u64> = None;
        let mut at = Some(dir.as_path());
        while let Some(d) = at.filter(|d| d.starts_with(top)) {
            let value = std::fs::read_to_string(d.join(file)).ok();
            if let Some(n) = value.and_then(|v| v.trim().parse::<u64>().ok()) {
                if n < UNLIMITED {
                    limit = Some(limit.map_or(n, |l| l.min(n)));
                }
            }
            at = d.parent();
        }
        limit
    };
    let relative = |path: &str| path.trim_start_matches('/').to_owned();
    for line in own.lines() {
        let mut fields = line.splitn(3, ':');
        let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
        if controllers.is_empty() {
            // cgroup v2, if it is what is mounted there (not only beside v1, as "unified").
            if mount.join("cgroup.controllers").exists() {
                return tightest(mount.join(relative(path)), mount, "memory.max");
            }
            continue;
        }
        if controllers.split(',').any(|c| c == "memory") {
            let top = mount.join("memory");
            return tightest(top.join(relative(path)), &top, "memory.limit_in_bytes");
        }
    }
    None
}

/// A size as people write it: `4mb`, `2GB`, `512k`, or bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let lower = text.trim().to_ascii_lowercase();
    let digits = lower.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit: u64 = match &lower[digits.len()..] {
        "" | "b" => 1,
        "k" | "kb" => 1 << 10,
        "m" | "mb" => 1 << 20,
        "g" | "gb" => 1 << 30,
        other => return Err(format!("unknown unit {other:?}: use kb, mb or gb")),
    };
    match digits
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(unit))
    {
        Some(0) | None => Err(format!("{text:?} is not a size such as 512mb or 2gb")),
        Some(bytes) => Ok(bytes),
    }
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
    let cmdline = String::from_utf8_lossy(&cmdline);
    if !redis_binaries::SERVER_NAMES
        .iter()
        .any(|name| cmdline.contains(name))
    {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("4mb"), Ok(4 << 20));
        assert_eq!(parse_size("2GB"), Ok(2 << 30));
        assert_eq!(parse_size("512k"), Ok(512 << 10));
        assert_eq!(parse_size("1000"), Ok(1000));
        for bad in ["0", "", "mb", "4tb", "-1mb", "1.5gb"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert!(default_maxmemory() > 0);
    }
    #[test]
    fn the_memory_limit_is_the_tightest_of_the_own_cgroup_and_its_parents() {
        let mount = tempfile::tempdir().expect("tempdir");
        let root = mount.path();
        let write = |dir: &str, file: &str, value: &str| {
            let dir = root.join(dir);
            std::fs::create_dir_all(&dir).expect("dir");
            std::fs::write(dir.join(file), value).expect("write");
        };
        // cgroup v2: the unit's MemoryMax= on its own cgroup, a looser one on its slice,
        // and the root's none. The top-level file is not the service's.
        write("", "cgroup.controllers", "cpu memory");
        write("system.slice", "memory.max", "8589934592");
        write("system.slice/delayq.service", "memory.max", "2147483648");
        let own = "0::/system.slice/delayq.service\n";
        assert_eq!(cgroup_limit(own, root), Some(2 << 30));
        write("system.slice/delayq.service", "memory.max", "max");
        assert_eq!(cgroup_limit(own, root), Some(8 << 30), "the slice's, then");
        assert_eq!(cgroup_limit("0::/\n", root), None, "the root has none");

        // cgroup v1 (beside a unified hierarchy that holds no memory controller).
        let v1 = tempfile::tempdir().expect("tempdir");
        let top = v1.path().join("memory/docker/abc");
        std::fs::create_dir_all(&top).expect("dir");
        std::fs::write(top.join("memory.limit_in_bytes"), "1073741824").expect("write");
        std::fs::write(
            v1.path().join("memory/memory.limit_in_bytes"),
            "9223372036854771712",
        )
        .expect("write");
        let own = "4:memory:/docker/abc\n1:name=systemd:/docker/abc\n0::/docker/abc\n";
        assert_eq!(cgroup_limit(own, v1.path()), Some(1 << 30));
    }
}
