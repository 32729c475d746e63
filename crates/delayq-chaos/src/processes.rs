//! The processes of a run: this binary again as producers, workers and HTTP consumers, and
//! `delayq serve`. Each writes its history into the run directory and its log beside it.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Which kind of process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A library worker (`delayq-chaos work`).
    Worker,
    /// An HTTP consumer (`delayq-chaos consume`).
    Consumer,
    /// A producer (`delayq-chaos produce`).
    Producer,
    /// `delayq serve`.
    Server,
}

/// A started process.
pub struct Proc {
    pub role: Role,
    pub child: Child,
    /// When SIGTERM was sent, if it was.
    pub terminated: Option<Instant>,
    /// Where its stderr goes.
    pub log: PathBuf,
}

impl Proc {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit status if it has exited (`None` while it runs).
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// What a report says of it when it crashed or hung: its role, pid, `why`, and the last
    /// lines of its log, so that a failed run in CI shows its cause in the output.
    pub fn crash_report(&self, why: &str) -> String {
        const LAST_LINES: usize = 30;
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LAST_LINES)..];
        let mut out = format!(
            "{:?} (pid {}) {why}; the last {} lines of {}:\n",
            self.role,
            self.pid(),
            tail.len(),
            self.log.display()
        );
        for line in tail {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
        out
    }
}

/// Starts processes into one run directory, numbering their files.
pub struct Launcher {
    dir: PathBuf,
    me: PathBuf,
    delayq_bin: PathBuf,
    started: usize,
    /// Set for every process started from now on (a scenario's, e.g. a stepped clock).
    env: Vec<(String, String)>,
    /// Where the server runs, when on a host of its own (a network scenario's).
    server_place: Option<Placement>,
}

/// A host of its own for the server: what its commands are prefixed with
/// (`ip netns exec NAME`), its address, and the arguments that reach Redis from it (and
/// whatever else that host needs).
pub struct Placement {
    pub prefix: Vec<String>,
    pub ip: String,
    pub redis_args: Vec<String>,
}

/// A command that runs `program` on the host `prefix` names (none: this one).
fn command_on(prefix: &[String], program: &Path) -> Command {
    match prefix.split_first() {
        None => Command::new(program),
        Some((first, rest)) => {
            let mut command = Command::new(first);
            command.args(rest).arg(program);
            command
        }
    }
}

impl Launcher {
    /// Launches this binary (`me`) and `delayq_bin` with files in `dir`.
    pub fn new(dir: &Path, me: PathBuf, delayq_bin: PathBuf) -> Launcher {
        Launcher {
            dir: dir.to_path_buf(),
            me,
            delayq_bin,
            started: 0,
            env: Vec::new(),
            server_place: None,
        }
    }

    /// Runs every server started from now on on its own host.
    pub fn place_server(&mut self, place: Placement) {
        self.server_place = Some(place);
    }

    /// The server's address.
    pub fn server_ip(&self) -> &str {
        self.server_place.as_ref().map_or("127.0.0.1", |p| &p.ip)
    }

    /// Sets `key` to `value` in the environment of every process started from now on.
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.push((key.to_owned(), value.to_owned()));
    }

    /// The `delayq` binary: the server, and the admin CLI.
    pub fn delayq_bin(&self) -> &Path {
        &self.delayq_bin
    }

    /// How far (ms) the clock that the processes started now read is from the true one
    /// (`clock-probe`, with their environment).
    pub fn clock_offset_ms(&self) -> Result<i64, String> {
        let out = Command::new(&self.me)
            .arg("clock-probe")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .output()
            .map_err(|e| format!("clock-probe: {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.trim()
            .parse()
            .map_err(|_| format!("clock-probe printed {text:?}"))
    }

    /// Starts this binary with `args` (then `--out` its history file).
    pub fn chaos(&mut self, role: Role, args: &[String]) -> std::io::Result<Proc> {
        self.chaos_on(&[], role, args)
    }

    /// [`chaos`](Self::chaos) on the host `prefix` names ([`Placement::prefix`]).
    pub fn chaos_on(
        &mut self,
        prefix: &[String],
        role: Role,
        args: &[String],
    ) -> std::io::Result<Proc> {
        self.started += 1;
        let name = format!("{:?}-{}", role, self.started).to_lowercase();
        let log = self.dir.join(format!("{name}.log"));
        let child = command_on(prefix, &self.me)
            .args(args)
            .arg("--out")
            .arg(self.dir.join(format!("{name}.jsonl")))
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(File::create(&log)?)
            .spawn()?;
        Ok(Proc {
            role,
            child,
            terminated: None,
            log,
        })
    }

    /// Starts `delayq serve` on `port` against `redis_url` and waits until it answers.
    pub fn server(&mut self, redis_url: &str, port: u16) -> Result<Proc, String> {
        self.server_on(&["--redis-url".into(), redis_url.into()], port)
    }

    /// Starts `delayq serve` on `port` with `redis_args` (`--redis-url URL` or
    /// `--redis-cluster URL,URL`) and waits until it answers.
    pub fn server_on(&mut self, redis_args: &[String], port: u16) -> Result<Proc, String> {
        self.started += 1;
        let log = self.dir.join(format!("server-{}.log", self.started));
        let log_file = File::create(&log).map_err(|e| format!("{log:?}: {e}"))?;
        let (prefix, redis_args) = match &self.server_place {
            Some(place) => (place.prefix.as_slice(), place.redis_args.as_slice()),
            None => (&[][..], redis_args),
        };
        let ip = self.server_ip().to_owned();
        let child = command_on(prefix, &self.delayq_bin)
            .arg("serve")
            .args(redis_args)
            .arg("--listen")
            .arg(format!("{ip}:{port}"))
            .env("RUST_LOG", "warn")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", self.delayq_bin))?;
        let mut server = Proc {
            role: Role::Server,
            child,
            terminated: None,
            log: log.clone(),
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while !healthy(&ip, port) {
            if let Some(status) = server.exited() {
                return Err(format!("delayq serve exited with {status}; see {log:?}"));
            }
            if Instant::now() > deadline {
                return Err("delayq serve did not answer /healthz within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }
}

fn healthy(ip: &str, port: u16) -> bool {
    let Ok(mut conn) = TcpStream::connect((ip, port)) else {
        return false;
    };
    let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
    if conn.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    conn.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

/// Sends `signal` (`TERM`, `STOP`, `CONT`) to `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .map_err(|e| format!("kill -{signal} {pid}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill -{signal} {pid}: {status}"))
    }
}
