//! The agents as child processes: spawning them (stderr to a log file), sending commands,
//! and collecting their events. One reader thread per agent turns its stdout into messages on
//! a shared channel, so the driver can wait on all of them at once with a timeout.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command as Process, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::agent::{Role, Via};
use crate::error::Result;
use crate::protocol::{self, Command, Event, Produced};
use crate::workload::Workload;

/// How to start one agent.
pub struct AgentSpec {
    /// Producer or consumer.
    pub role: Role,
    /// Workload id.
    pub workload: Workload,
    /// Redis port.
    pub port: u16,
    /// N.
    pub n: u64,
    /// Consumer: its deliveries file.
    pub deliveries: Option<PathBuf>,
    /// Where its stderr goes.
    pub log: PathBuf,
    /// How it reaches the queue, and `delayq serve`'s port when through HTTP.
    pub via: Via,
    pub http_port: Option<u16>,
    /// `port` is a node of a Redis Cluster (`--cluster`).
    pub cluster: bool,
}

/// What a reader thread reports.
enum Incoming {
    Event(Event, Value),
    Garbage(String),
    Closed,
}

struct Msg {
    agent: usize,
    incoming: Incoming,
}

/// One agent process and what it has said so far.
pub struct AgentProc {
    /// `producer` or `consumer-<i>`.
    pub name: String,
    /// Its role.
    pub role: Role,
    child: Child,
    stdin: Option<ChildStdin>,
    /// Told to stop or exit: its end of output is expected from now on.
    dismissed: bool,
    /// Its stdout has closed.
    closed: bool,
    exit: Option<ExitStatus>,
    /// `ready`: system, version, config.
    pub ready: Option<(String, String, Value)>,
    /// `started`: when.
    pub started_ms: Option<f64>,
    /// Latest `progress` (or `stopped`) total.
    pub total: u64,
    /// `produced`, parsed and raw.
    pub produced: Option<(Produced, Value)>,
    /// `stopped`, raw.
    pub stopped: Option<Value>,
}

/// All agents of one workload.
pub struct Fleet {
    agents: Vec<AgentProc>,
    tx: Sender<Msg>,
    rx: Receiver<Msg>,
    errors: Vec<String>,
    /// When the consumers' summed total last grew.
    last_delivery: Instant,
    /// Another system's agent command line, run instead of this executable's `agent`.
    command: Option<Vec<String>>,
}

impl AgentProc {
    /// Whether its stdout has closed (it exited or is about to).
    pub fn is_closed(&self) -> bool {
        self.closed
    }
}

impl Fleet {
    /// A fleet of another system's agents (`command`: program and first arguments), or of
    /// delayq's own (`None`).
    pub fn of(command: Option<Vec<String>>) -> Self {
        let mut fleet = Fleet::new();
        fleet.command = command;
        fleet
    }

    /// No agents yet.
    pub fn new() -> Self {
        let (tx, rx) = mpsc::channel();
        Fleet {
            agents: Vec::new(),
            tx,
            rx,
            errors: Vec::new(),
            last_delivery: Instant::now(),
            command: None,
        }
    }

    /// Starts an agent (this same executable, `agent …`, or the fleet's command); returns
    /// its index.
    pub fn spawn(&mut self, spec: &AgentSpec) -> Result<usize> {
        let log = File::create(&spec.log)
            .map_err(|e| format!("cannot create {}: {e}", spec.log.display()))?;
        let mut cmd = match &self.command {
            Some(command) => {
                let (program, args) = command.split_first().ok_or("an empty --agent")?;
                let mut cmd = Process::new(program);
                cmd.args(args);
                cmd
            }
            None => {
                let exe = std::env::current_exe()
                    .map_err(|e| format!("cannot locate this executable: {e}"))?;
                let mut cmd = Process::new(exe);
                cmd.arg("agent");
                cmd
            }
        };
        cmd.args([
            "--role",
            spec.role.as_str(),
            "--workload",
            spec.workload.as_str(),
            "--port",
            &spec.port.to_string(),
            "--n",
            &spec.n.to_string(),
        ]);
        if let Some(file) = &spec.deliveries {
            cmd.arg("--deliveries").arg(file);
        }
        if self.command.is_none() {
            cmd.args(["--via", spec.via.as_str()]);
            if let Some(port) = spec.http_port {
                cmd.arg("--http-port").arg(port.to_string());
            }
            if spec.cluster {
                cmd.arg("--cluster");
            }
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start the {} agent: {e}", spec.role.as_str()))?;
        let stdout = child.stdout.take().ok_or("agent has no stdout pipe")?;
        let stdin = child.stdin.take();
        let index = self.agents.len();
        let name = match spec.role {
            Role::Producer => "producer".to_owned(),
            Role::Consumer => format!(
                "consumer-{}",
                self.agents
                    .iter()
                    .filter(|a| a.role == Role::Consumer)
                    .count()
            ),
        };
        let tx = self.tx.clone();
        std::thread::spawn(move || read_events(index, stdout, tx));
        tracing::info!(agent = %name, pid = child.id(), "agent started");
        self.agents.push(AgentProc {
            name,
            role: spec.role,
            child,
            stdin,
            dismissed: false,
            closed: false,
            exit: None,
            ready: None,
            started_ms: None,
            total: 0,
            produced: None,
            stopped: None,
        });
        Ok(index)
    }

    /// The agents.
    pub fn agents(&self) -> &[AgentProc] {
        &self.agents
    }

    /// Indices of the agents with `role`.
    pub fn with_role(&self, role: Role) -> Vec<usize> {
        (0..self.agents.len())
            .filter(|&i| self.agents[i].role == role)
            .collect()
    }

    /// Sends a command to agent `index`.
    pub fn send(&mut self, index: usize, command: Command) -> Result<()> {
        let agent = self
            .agents
            .get_mut(index)
            .ok_or_else(|| format!("no agent {index}"))?;
        if matches!(command, Command::Stop | Command::Exit) {
            agent.dismissed = true;
        }
        let line = protocol::to_line(&command)?;
        let stdin = agent
            .stdin
            .as_mut()
            .ok_or_else(|| format!("{}: stdin already closed", agent.name))?;
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("{}: cannot send {line}: {e}", agent.name).into())
    }

    /// Errors so far (agent `error` events, crashes, protocol violations).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// Whether any agent failed.
    pub fn failed(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Deliveries so far, summed over consumers (duplicates included).
    pub fn consumer_total(&self) -> u64 {
        self.agents
            .iter()
            .filter(|a| a.role == Role::Consumer)
            .map(|a| a.total)
            .sum()
    }

    /// When the summed consumer total last grew.
    pub fn last_delivery(&self) -> Instant {
        self.last_delivery
    }

    /// Resets the no-delivery clock (when consuming begins).
    pub fn reset_last_delivery(&mut self) {
        self.last_delivery = Instant::now();
    }

    /// The producer's `produced` event, once it came.
    pub fn produced(&self) -> Option<&(Produced, Value)> {
        self.agents.iter().find_map(|a| a.produced.as_ref())
    }

    /// Waits up to `timeout` for agent output and takes in everything that arrived.
    pub fn poll(&mut self, timeout: Duration) {
        match self.rx.recv_timeout(timeout) {
            Ok(msg) => self.take(msg),
            Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return,
        }
        while let Ok(msg) = self.rx.try_recv() {
            self.take(msg);
        }
    }

    /// Polls until `done` holds; fails when an agent fails or at `deadline`.
    pub fn wait_until(
        &mut self,
        deadline: Instant,
        what: &str,
        done: impl Fn(&Fleet) -> bool,
    ) -> Result<()> {
        loop {
            if done(self) {
                return Ok(());
            }
            if self.failed() {
                return Err(format!("gave up waiting for {what}: an agent failed").into());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("timed out waiting for {what}").into());
            }
            self.poll((deadline - now).min(Duration::from_millis(100)));
        }
    }

    fn take(&mut self, msg: Msg) {
        let Some(agent) = self.agents.get_mut(msg.agent) else {
            return;
        };
        match msg.incoming {
            Incoming::Event(event, raw) => match event {
                Event::Ready {
                    system,
                    version,
                    config,
                } => agent.ready = Some((system, version, config)),
                Event::Started { t_ms } => agent.started_ms = Some(t_ms),
                Event::Progress { total, .. } => {
                    if total > agent.total {
                        agent.total = total;
                        self.last_delivery = Instant::now();
                    }
                }
                Event::Produced(p) => agent.produced = Some((p, raw)),
                Event::Stopped {
                    total,
                    bad_payloads,
                    ..
                } => {
                    agent.total = agent.total.max(total);
                    agent.stopped = Some(raw);
                    if bad_payloads > 0 {
                        self.errors.push(format!(
                            "{}: {bad_payloads} deliveries had a payload that is not one of ours",
                            agent.name
                        ));
                    }
                }
                Event::Error { msg } => self.errors.push(format!("{}: {msg}", agent.name)),
            },
            Incoming::Garbage(line) => self.errors.push(format!(
                "{}: not a protocol line on stdout: {line:?}",
                agent.name
            )),
            Incoming::Closed => {
                agent.closed = true;
                if !agent.dismissed {
                    self.errors.push(format!(
                        "{} ended before it was told to stop (crashed?)",
                        agent.name
                    ));
                }
            }
        }
    }

    /// Waits up to `timeout` for every agent to exit, then kills the rest. Non-zero exits and
    /// kills are recorded as errors.
    pub fn finish(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        for agent in &mut self.agents {
            // Closing stdin tells an agent still waiting for a command that the driver is done.
            agent.stdin = None;
        }
        loop {
            let mut running = false;
            for agent in &mut self.agents {
                if agent.exit.is_none() {
                    match agent.child.try_wait() {
                        Ok(Some(status)) => agent.exit = Some(status),
                        Ok(None) => running = true,
                        Err(e) => {
                            self.errors
                                .push(format!("{}: cannot wait for it: {e}", agent.name));
                            agent.exit = Some(ExitStatus::default());
                        }
                    }
                }
            }
            if !running || Instant::now() >= deadline {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for agent in &mut self.agents {
            match agent.exit {
                Some(status) if !status.success() => self
                    .errors
                    .push(format!("{} exited with {status}", agent.name)),
                Some(_) => {}
                None => {
                    self.errors.push(format!(
                        "{} did not exit within {timeout:?}; killed",
                        agent.name
                    ));
                    let _ = agent.child.kill();
                    agent.exit = agent.child.wait().ok();
                }
            }
        }
        // Messages still queued (a last error event) count too.
        while let Ok(msg) = self.rx.try_recv() {
            self.take(msg);
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        // Never leave an agent behind, whatever path led here. Only our own children, by
        // their handles.
        for agent in &mut self.agents {
            if agent.exit.is_none() && matches!(agent.child.try_wait(), Ok(None)) {
                let _ = agent.child.kill();
                let _ = agent.child.wait();
            }
        }
    }
}

/// The reader thread of one agent's stdout.
fn read_events(agent: usize, stdout: impl std::io::Read, tx: Sender<Msg>) {
    for line in BufReader::new(stdout).lines() {
        let incoming = match line {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => match protocol::parse_event(&line) {
                Ok((event, raw)) => Incoming::Event(event, raw),
                Err(_) => Incoming::Garbage(line),
            },
            Err(_) => break,
        };
        if tx.send(Msg { agent, incoming }).is_err() {
            return;
        }
    }
    let _ = tx.send(Msg {
        agent,
        incoming: Incoming::Closed,
    });
}
