//! A `MONITOR` connection: every command the server runs, as the server runs it. A test
//! waits on it for a client's call to have reached Redis (a consumer's claim before it
//! waits, say), a condition no count of commands can tell apart from background calls.
//! Redis runs one command at a time, so a command the test sends after the wait is run
//! after the one it waited for.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A connection in `MONITOR` mode.
pub struct Monitor {
    reader: BufReader<TcpStream>,
}

impl Monitor {
    /// Opens a connection to `127.0.0.1:port` and puts it in `MONITOR` mode.
    pub fn open(port: u16) -> Result<Monitor, String> {
        let mut stream =
            TcpStream::connect(("127.0.0.1", port)).map_err(|e| format!("connect: {e}"))?;
        stream
            .write_all(b"MONITOR\r\n")
            .map_err(|e| format!("MONITOR: {e}"))?;
        let mut reader = BufReader::new(stream);
        let mut ok = String::new();
        reader
            .read_line(&mut ok)
            .map_err(|e| format!("MONITOR: {e}"))?;
        if ok.trim_end() != "+OK" {
            return Err(format!("MONITOR answered {ok:?}"));
        }
        Ok(Monitor { reader })
    }

    /// Waits, at most `limit`, for a command whose line (as `MONITOR` shows it: the time,
    /// the client, then each argument quoted) contains every one of `words`; returns that
    /// line.
    pub fn wait_for(&mut self, words: &[&str], limit: Duration) -> Result<String, String> {
        self.wait_for_any(words, &[], limit)
    }

    /// [`wait_for`](Self::wait_for) a line that also contains one of `any` (none: no more
    /// is asked).
    pub fn wait_for_any(
        &mut self,
        words: &[&str],
        any: &[&str],
        limit: Duration,
    ) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(format!("no command with {words:?} within {limit:?}"));
            }
            self.reader
                .get_ref()
                .set_read_timeout(Some(left))
                .map_err(|e| e.to_string())?;
            let mut line = String::new();
            match self.reader.read_line(&mut line) {
                Ok(0) => return Err("the server closed the MONITOR connection".into()),
                Ok(_)
                    if words.iter().all(|w| line.contains(w))
                        && (any.is_empty() || any.iter().any(|w| line.contains(w))) =>
                {
                    return Ok(line)
                }
                Ok(_) => {}
                Err(e) => return Err(format!("no command with {words:?} within {limit:?}: {e}")),
            }
        }
    }
}
