//! `delayq serve` as a child process, for `--via http` and `--via push` runs: started on the
//! workload's Redis and a free loopback port, checked with `/healthz`, killed when dropped.

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::Result;

/// How long the server may take to answer `/healthz`.
const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `delayq serve`.
pub struct HttpServer {
    child: Child,
    port: u16,
}

impl HttpServer {
    /// Starts `bin serve` on Redis at `redis_port` with `extra` arguments, its log in `log`.
    pub fn start(bin: &Path, redis_port: u16, extra: &[&str], log: &Path) -> Result<Self> {
        let port = redis_fixture::free_port();
        let log_file =
            File::create(log).map_err(|e| format!("cannot create {}: {e}", log.display()))?;
        let child = Command::new(bin)
            .args(["serve", "--redis-url"])
            .arg(format!("redis://127.0.0.1:{redis_port}/"))
            .arg("--listen")
            .arg(format!("127.0.0.1:{port}"))
            .args(extra)
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start {} serve: {e}", bin.display()))?;
        let mut server = HttpServer { child, port };
        let started = Instant::now();
        while !server.healthy() {
            if let Ok(Some(status)) = server.child.try_wait() {
                return Err(
                    format!("delayq serve exited with {status}; see {}", log.display()).into(),
                );
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(format!("delayq serve not up after {READY_TIMEOUT:?}").into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    fn healthy(&self) -> bool {
        let Ok(mut conn) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = conn.set_read_timeout(Some(Duration::from_secs(1)));
        if conn.write_all(b"GET /healthz HTTP/1.0\r\n\r\n").is_err() {
            return false;
        }
        let mut head = [0u8; 12];
        conn.read_exact(&mut head).is_ok() && head.ends_with(b"200")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
