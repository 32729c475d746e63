//! The `redis-server` child process and its lifecycle.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::host::{free_port, redis_server_binary};
use crate::resp::{Connection, Reply};

const READY_TIMEOUT: Duration = Duration::from_secs(10);
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const POLL_INTERVAL: Duration = Duration::from_millis(10);
const START_ATTEMPTS: usize = 5;
/// How long `restart` keeps retrying while the old port is still busy.
const RESTART_PORT_WAIT: Duration = Duration::from_secs(3);

/// Options for the started server. Build from [`ServerConfig::default`],
/// [`ServerConfig::appendonly`], [`ServerConfig::cluster`] or
/// [`ServerConfig::cluster_node`], then adjust the public fields.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ServerConfig {
    /// Enable the AOF with `appendfsync always`, so data written before a
    /// [`RedisServer::kill`] survives a [`RedisServer::restart`].
    pub appendonly: bool,
    /// Run as a single-node cluster that owns all 16384 slots.
    pub cluster: bool,
    /// Run in cluster mode but leave the slots alone: one node of a
    /// multi-node cluster that somebody else joins and assigns slots to (see
    /// [`RedisCluster`](crate::RedisCluster)). The cluster bus gets its own
    /// free port instead of `port + 10000`. Ignored if `cluster` is set.
    pub cluster_node: bool,
    /// Extra `redis-server` arguments, appended after the fixture's own.
    pub extra_args: Vec<String>,
    /// The server binary to run instead of the one [`redis_server_binary`] finds (an older
    /// or another server: [`tested_server`](crate::tested_server)).
    pub binary: Option<std::path::PathBuf>,
    /// Run as a sentinel (`redis-server sentinel.conf --sentinel`) with this text as the
    /// start of its config file, written into the server's directory before the first
    /// launch only: a sentinel rewrites the file with what it learns, and a restarted one
    /// must read that back. Set by [`RedisSentinel`](crate::RedisSentinel).
    pub(crate) sentinel_conf: Option<String>,
}

impl ServerConfig {
    /// Default config with the append-only file enabled.
    pub fn appendonly() -> Self {
        Self {
            appendonly: true,
            ..Self::default()
        }
    }

    /// Default config in single-node cluster mode.
    pub fn cluster() -> Self {
        Self {
            cluster: true,
            ..Self::default()
        }
    }

    /// Default config for one node of a multi-node cluster: cluster mode,
    /// no slots (see [`ServerConfig::cluster_node`](Self#structfield.cluster_node)).
    pub fn cluster_node() -> Self {
        Self {
            cluster_node: true,
            ..Self::default()
        }
    }

    /// Whether to pick a free port for the cluster bus and pass it as
    /// `--cluster-port`. Only for `cluster_node`, so that `cluster` keeps the
    /// default bus port it always had.
    fn own_bus_port(&self) -> bool {
        self.cluster_node && !self.cluster
    }
}

/// When a launched server counts as up.
#[derive(Clone, Copy)]
enum Ready {
    /// Answers `PING` with `PONG`: its data is loaded.
    Serving,
    /// Answers at all, even `-LOADING`.
    Answering,
}

/// Why one launch attempt failed: an early exit is worth retrying (usually
/// somebody else grabbed the port), anything else is not.
enum LaunchError {
    Exited(String),
    Fatal(String),
}

/// A real `redis-server` child process listening on `127.0.0.1:port`, with
/// its data and log in a private temporary directory. Killed (SIGKILL) on
/// drop; the directory is removed afterwards.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    /// The cluster bus port passed as `--cluster-port`, or 0 for Redis's
    /// default (`port + 10000`). Kept across restarts like `port`: other
    /// nodes know the node by both.
    bus_port: u16,
    dir: TempDir,
    config: ServerConfig,
}

impl RedisServer {
    /// Starts a server with the default config; panics (with the server
    /// log) if it cannot be started.
    pub fn start() -> RedisServer {
        Self::start_with(ServerConfig::default())
    }

    /// Starts a server with `config` and waits until it answers `PING`
    /// (and, in cluster mode, until `cluster_state:ok`). Panics with the
    /// server log on failure.
    pub fn start_with(config: ServerConfig) -> RedisServer {
        let dir = tempfile::Builder::new()
            .prefix("redis-fixture-")
            .tempdir()
            .expect("cannot create a temporary directory for redis-server");
        // Constructed before spawning so that a panic below unwinds through
        // Drop and never leaks the child process.
        let mut server = RedisServer {
            child: None,
            port: 0,
            bus_port: 0,
            dir,
            config,
        };
        for attempt in 1..=START_ATTEMPTS {
            server.port = free_port();
            if server.config.own_bus_port() {
                // The default bus port, port + 10000, does not exist for
                // ephemeral ports above 55535, and nobody checked it is free.
                server.bus_port = loop {
                    let bus_port = free_port();
                    if bus_port != server.port {
                        break bus_port;
                    }
                };
            }
            // A failed attempt may leave a nodes.conf naming the old port.
            let _ = std::fs::remove_file(server.dir.path().join("nodes.conf"));
            match server.launch(Ready::Serving) {
                Ok(()) => break,
                Err(LaunchError::Exited(_)) if attempt < START_ATTEMPTS => continue,
                Err(LaunchError::Exited(why) | LaunchError::Fatal(why)) => server.fail(&why),
            }
        }
        server.setup_cluster();
        server
    }

    /// The TCP port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Connection URL, e.g. `redis://127.0.0.1:6380/`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// The process id of the running server, for signals such as `SIGSTOP`.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The server's working directory (AOF, `nodes.conf`, `redis.log`).
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Kills the server with SIGKILL (no clean shutdown, like a crash) and
    /// reaps it. Does nothing if it is not running.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Fails only if the process already exited; wait() reaps either way.
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server if it is running, then starts it again on the same
    /// port and directory with the same config, and waits until it has
    /// finished loading its data. Panics with the server log on failure.
    pub fn restart(&mut self) {
        self.relaunch(Ready::Serving);
        self.setup_cluster();
    }

    /// Like [`restart`](Self::restart), but returns as soon as the server answers at all,
    /// typically with `-LOADING` while it reads a large AOF: for testing what clients do
    /// while Redis loads. Not for cluster mode.
    pub fn restart_loading(&mut self) {
        self.relaunch(Ready::Answering);
    }

    /// True while the server answers `-LOADING`.
    pub fn is_loading(&self) -> bool {
        matches!(self.command(&["PING"]), Ok(Reply::Error(e)) if e.starts_with("LOADING"))
    }

    fn relaunch(&mut self, ready: Ready) {
        self.kill();
        let deadline = Instant::now() + RESTART_PORT_WAIT;
        loop {
            match self.launch(ready) {
                Ok(()) => break,
                Err(LaunchError::Exited(_)) if Instant::now() < deadline => {
                    sleep(Duration::from_millis(50));
                }
                Err(LaunchError::Exited(why) | LaunchError::Fatal(why)) => self.fail(&why),
            }
        }
    }

    /// Whether the child process is still alive.
    pub fn is_running(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The server's log file so far (all runs, including restarts).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("redis.log"))
            .unwrap_or_else(|e| format!("<cannot read redis.log: {e}>"))
    }

    /// Sends one command over a fresh connection and returns the reply.
    /// Error replies from the server are `Ok(Reply::Error(_))`; `Err` means
    /// the connection or the protocol failed.
    pub fn command(&self, args: &[&str]) -> Result<Reply, String> {
        Connection::open(self.port, CALL_TIMEOUT)
            .and_then(|mut conn| conn.call(args))
            .map_err(|e| format!("{args:?} on port {}: {e}", self.port))
    }

    /// How many calls of `command` (as `INFO commandstats` names it: `fcall`, `xrange`,
    /// `function|load`) this server ran since its stats were reset (`CONFIG RESETSTAT`).
    pub fn command_calls(&self, command: &str) -> u64 {
        self.cli(&["INFO", "commandstats"])
            .lines()
            .find_map(|line| line.strip_prefix(&format!("cmdstat_{command}:calls=")))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// A `MONITOR` connection to this server: every command it runs from now on.
    pub fn monitor(&self) -> crate::Monitor {
        crate::Monitor::open(self.port()).unwrap_or_else(|e| self.fail(&e))
    }

    /// How many script calls (`FCALL` and `EVALSHA`) this server ran since its stats were
    /// reset: a test waits on it for a client's call to have run, e.g. a consumer's claim
    /// before it waits.
    pub fn script_calls(&self) -> u64 {
        self.command_calls("fcall") + self.command_calls("evalsha")
    }

    /// Runs a command and returns the reply as text (see [`Reply::render`]).
    /// Panics with the server log on connection failure or error reply.
    pub fn cli(&self, args: &[&str]) -> String {
        match self.command(args) {
            Ok(Reply::Error(e)) => self.fail(&format!("replied to {args:?} with error: {e}")),
            Ok(reply) => reply.render(),
            Err(e) => self.fail(&e),
        }
    }

    /// Every key that matches `pattern` (as `KEYS` takes it) with its serialized value
    /// (`DUMP`), sorted by key: what a test compares to show that a refused call left Redis
    /// exactly as it was.
    pub fn every_key_dumped(&self, pattern: &str) -> Vec<(String, String)> {
        let keys = match self.command(&["KEYS", pattern]) {
            Ok(Reply::Array(Some(keys))) => keys,
            other => self.fail(&format!("KEYS {pattern} answered {other:?}")),
        };
        let mut out: Vec<(String, String)> = keys
            .iter()
            .map(|k| {
                let key = k.render();
                let dump = self.cli(&["DUMP", &key]);
                (key, dump)
            })
            .collect();
        out.sort();
        out
    }

    /// Every key with its value read raw by its type (`GET`, `HGETALL`, `ZRANGE`, `LRANGE`,
    /// `SMEMBERS`, `XRANGE`; never `DUMP`, which may compress a value), as text (see
    /// [`Reply::render`]): what a test searches to show that a value never reached Redis.
    /// A key whose reads answer an error (a cluster replica's `MOVED`), or one gone since it
    /// was listed, is left out; a key of another type fails the test.
    pub fn every_value_read(&self) -> Vec<(String, String)> {
        let keys = match self.command(&["KEYS", "*"]) {
            Ok(Reply::Array(Some(keys))) => keys,
            other => self.fail(&format!("KEYS * answered {other:?}")),
        };
        let mut out = Vec::new();
        for key in keys.iter().map(Reply::render) {
            // A cluster replica answers MOVED, to TYPE as to the read: its master reads it.
            let kind = match self.command(&["TYPE", &key]) {
                Ok(Reply::Error(_)) | Err(_) => continue,
                Ok(kind) => kind.render(),
            };
            let read: Vec<&str> = match kind.trim() {
                "string" => vec!["GET", &key],
                "hash" => vec!["HGETALL", &key],
                "zset" => vec!["ZRANGE", &key, "0", "-1"],
                "list" => vec!["LRANGE", &key, "0", "-1"],
                "set" => vec!["SMEMBERS", &key],
                "stream" => vec!["XRANGE", &key, "-", "+"],
                // Gone since it was listed (expired).
                "none" => continue,
                other => self.fail(&format!("key {key} is of type {other}, read by none here")),
            };
            match self.command(&read) {
                Ok(Reply::Error(_)) | Err(_) => {}
                Ok(value) => out.push((key.clone(), value.render())),
            }
        }
        out
    }

    /// Makes the server unable to persist, as a full or broken disk does: it refuses every
    /// write (`MISCONF`) until [`persist_again`](Self::persist_again). Done with a snapshot
    /// that fails (saving on, and a directory where its file goes), which needs no root, no
    /// small disk and no protected config.
    pub fn fail_persistence(&self) {
        let blocker = self.dir.path().join("dump.rdb").join("in-the-way");
        std::fs::create_dir_all(&blocker).expect("a directory where the snapshot goes");
        self.cli(&["CONFIG", "SET", "save", "3600 1"]);
        self.cli(&["CONFIG", "SET", "stop-writes-on-bgsave-error", "yes"]);
        self.cli(&["BGSAVE"]);
        self.await_bgsave_status("err");
    }

    /// Lets a server made unable to persist by [`fail_persistence`](Self::fail_persistence)
    /// persist again: a snapshot that works, and saving off again.
    pub fn persist_again(&self) {
        std::fs::remove_dir_all(self.dir.path().join("dump.rdb")).expect("clear the way");
        self.cli(&["BGSAVE"]);
        self.await_bgsave_status("ok");
        self.cli(&["CONFIG", "SET", "save", ""]);
    }

    fn await_bgsave_status(&self, wanted: &str) {
        let field = format!("rdb_last_bgsave_status:{wanted}");
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let info = self.cli(&["INFO", "persistence"]);
            if info.contains(&field) && info.contains("rdb_bgsave_in_progress:0") {
                return;
            }
            if Instant::now() > deadline {
                self.fail(&format!("the snapshot's status is not {wanted}: {info}"));
            }
            sleep(Duration::from_millis(10));
        }
    }

    /// Field `field` of `INFO section`, as text: `None` when the server does not answer, or
    /// answers without that field.
    pub fn info_field(&self, section: &str, field: &str) -> Option<String> {
        let Ok(Reply::Bulk(Some(info))) = self.command(&["INFO", section]) else {
            return None;
        };
        let prefix = format!("{field}:");
        String::from_utf8_lossy(&info)
            .lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .map(|v| v.trim().to_owned())
    }

    /// `used_memory` from `INFO memory`, in bytes.
    pub fn used_memory(&self) -> u64 {
        self.info_field("memory", "used_memory")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| self.fail("INFO memory has no used_memory field"))
    }

    fn fail(&self, why: &str) -> ! {
        panic!(
            "redis-server on port {}: {why}\n{}",
            self.port,
            self.diagnostics()
        )
    }

    /// The server's stderr and log, framed for a panic message.
    pub(crate) fn diagnostics(&self) -> String {
        let stderr =
            std::fs::read_to_string(self.dir.path().join("redis.stderr")).unwrap_or_default();
        format!(
            "--- stderr ---\n{}--- {} ---\n{}\n--- end of log ---",
            stderr,
            self.dir.path().join("redis.log").display(),
            self.log()
        )
    }

    fn args(&self) -> Vec<String> {
        let dir = self.dir.path();
        if self.config.sentinel_conf.is_some() {
            let mut args: Vec<String> = vec![
                self.sentinel_conf_path().display().to_string(),
                "--sentinel".into(),
                "--port".into(),
                self.port.to_string(),
                "--bind".into(),
                "127.0.0.1".into(),
                "--dir".into(),
                dir.display().to_string(),
                "--logfile".into(),
                dir.join("redis.log").display().to_string(),
                "--protected-mode".into(),
                "yes".into(),
            ];
            args.extend(self.config.extra_args.iter().cloned());
            return args;
        }
        let mut args: Vec<String> = vec![
            "--port".into(),
            self.port.to_string(),
            "--bind".into(),
            "127.0.0.1".into(),
            "--save".into(),
            String::new(),
            "--dir".into(),
            dir.display().to_string(),
            "--logfile".into(),
            dir.join("redis.log").display().to_string(),
            "--appendonly".into(),
            if self.config.appendonly { "yes" } else { "no" }.into(),
        ];
        if self.config.appendonly {
            args.extend(["--appendfsync".into(), "always".into()]);
        }
        if self.config.cluster || self.config.cluster_node {
            args.extend([
                "--cluster-enabled".into(),
                "yes".into(),
                "--cluster-config-file".into(),
                dir.join("nodes.conf").display().to_string(),
            ]);
        }
        if self.bus_port != 0 {
            args.extend(["--cluster-port".into(), self.bus_port.to_string()]);
        }
        args.extend(["--protected-mode".into(), "yes".into()]);
        args.extend(self.config.extra_args.iter().cloned());
        args
    }

    fn sentinel_conf_path(&self) -> std::path::PathBuf {
        self.dir.path().join("sentinel.conf")
    }

    /// Spawns the child on `self.port` and waits until it serves requests.
    fn launch(&mut self, ready: Ready) -> Result<(), LaunchError> {
        if let Some(conf) = &self.config.sentinel_conf {
            let path = self.sentinel_conf_path();
            if !path.exists() {
                std::fs::write(&path, conf).map_err(|e| {
                    LaunchError::Fatal(format!("cannot write {}: {e}", path.display()))
                })?;
            }
        }
        // Config errors are printed to stderr before the log file is opened.
        let stderr = std::fs::File::create(self.dir.path().join("redis.stderr"))
            .map_err(|e| LaunchError::Fatal(format!("cannot create redis.stderr: {e}")))?;
        let binary = self
            .config
            .binary
            .clone()
            .unwrap_or_else(redis_server_binary);
        let child = Command::new(binary)
            .args(self.args())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| LaunchError::Fatal(format!("cannot spawn redis-server: {e}")))?;
        let pid = child.id();
        self.child = Some(child);
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(child) = self.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    self.child = None;
                    return Err(LaunchError::Exited(format!(
                        "exited during startup: {status}"
                    )));
                }
            }
            if Self::is_ready(self.port, pid, ready) {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LaunchError::Fatal(format!(
                    "not ready after {READY_TIMEOUT:?}"
                )));
            }
            sleep(POLL_INTERVAL);
        }
    }

    /// True once the server on `port` answers (a real `PONG` for `Ready::Serving`) and is
    /// our child: another server that grabbed the port first would also answer, while ours
    /// is about to die with "address in use".
    fn is_ready(port: u16, pid: u32, ready: Ready) -> bool {
        let Ok(mut conn) = Connection::open(port, Duration::from_secs(1)) else {
            return false;
        };
        match (conn.call(&["PING"]), ready) {
            (Ok(Reply::Simple(s)), _) if s == "PONG" => {}
            // INFO is served while loading, so the pid check below still works.
            (Ok(Reply::Error(e)), Ready::Answering) if e.starts_with("LOADING") => {}
            _ => return false,
        }
        let Ok(Reply::Bulk(Some(info))) = conn.call(&["INFO", "server"]) else {
            return false;
        };
        String::from_utf8_lossy(&info)
            .lines()
            .any(|l| l.trim() == format!("process_id:{pid}"))
    }

    fn setup_cluster(&self) {
        if !self.config.cluster {
            return;
        }
        // After a restart nodes.conf already assigns the slots.
        match self.command(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]) {
            Ok(Reply::Error(e)) if e.contains("already busy") => {}
            Ok(Reply::Error(e)) => self.fail(&format!("CLUSTER ADDSLOTSRANGE failed: {e}")),
            Ok(_) => {}
            Err(e) => self.fail(&e),
        }
        // A fresh master holds the cluster in fail state for ~2 s on purpose
        // (CLUSTER_WRITABLE_DELAY), so this really has to poll.
        let deadline = Instant::now() + READY_TIMEOUT;
        while !self.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            if Instant::now() >= deadline {
                self.fail(&format!("cluster_state not ok after {READY_TIMEOUT:?}"));
            }
            sleep(POLL_INTERVAL);
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
