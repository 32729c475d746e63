//! A fresh redis-server per measurement, through `redis_fixture` (loopback, `--save ""`,
//! `--appendonly no`, plus `$REDIS_EXTRA`), with the few commands the driver needs turned
//! into errors instead of the fixture's panics.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Duration, Instant};

use redis_fixture::{RedisServer, Reply, ServerConfig};

use super::redis_cpu::CpuTimes;
use crate::error::Result;
use crate::metrics::MemoryInfo;

/// A running redis-server, killed (by its own child handle) when dropped.
pub struct BenchServer {
    inner: RedisServer,
    extra: Vec<String>,
}

impl BenchServer {
    /// Starts a server with `extra` arguments appended and empties it (`FLUSHALL` right
    /// after start).
    pub fn start(extra: &[String]) -> Result<Self> {
        let mut config = ServerConfig::default();
        config.extra_args = extra.to_vec();
        // The fixture panics (with the server log) when it cannot start a server; one failed
        // workload must not take the whole run down.
        let inner = catch_unwind(AssertUnwindSafe(|| RedisServer::start_with(config))).map_err(
            |panic| {
                let why = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "unknown reason".into());
                format!("cannot start redis-server: {why}")
            },
        )?;
        let server = BenchServer {
            inner,
            extra: extra.to_vec(),
        };
        server.flushall()?;
        Ok(server)
    }

    /// Its process id (of the server, or of what runs it: valgrind for `call-cost`).
    pub fn pid(&self) -> Option<u32> {
        self.inner.pid()
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.inner.port()
    }

    /// The server's arguments, as the fixture passes them (for the record).
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            "--port",
            &self.port().to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--dir",
            &self.inner.dir().display().to_string(),
            "--logfile",
            "<dir>/redis.log",
            "--appendonly",
            "no",
            "--protected-mode",
            "yes",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.extend(self.extra.iter().cloned());
        args
    }

    /// `FLUSHALL`.
    pub fn flushall(&self) -> Result<()> {
        self.ok(&["FLUSHALL"])
    }

    /// Runs one command, which must answer `OK`.
    pub fn ok(&self, args: &[&str]) -> Result<()> {
        match self.inner.command(args)? {
            Reply::Simple(s) if s == "OK" => Ok(()),
            other => Err(format!("{args:?} replied {other:?}").into()),
        }
    }

    /// Runs one command, whatever it answers.
    pub fn run(&self, args: &[&str]) -> Result<()> {
        self.inner.command(args)?;
        Ok(())
    }

    /// `INFO commandstats`: per command, its calls and the µs Redis spent in them.
    pub fn command_stats(&self) -> Result<Vec<(String, u64, u64)>> {
        let info = self.info("commandstats")?;
        let field = |line: &str, name: &str| -> u64 {
            line.split(',')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        Ok(info
            .lines()
            .filter_map(|l| l.strip_prefix("cmdstat_"))
            .filter_map(|l| {
                let (name, rest) = l.split_once(':')?;
                Some((name.to_owned(), field(rest, "calls"), field(rest, "usec")))
            })
            .collect())
    }

    /// Writes the data set to `dump.rdb` (`BGSAVE`, then waits for it: a big one outlasts a
    /// `SAVE`'s reply timeout), which the server loads when started again.
    pub fn save(&self) -> Result<()> {
        match self.inner.command(&["BGSAVE"])? {
            Reply::Simple(_) => {}
            other => return Err(format!("BGSAVE replied {other:?}").into()),
        }
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            let info = self.info("persistence")?;
            if info_field(&info, "rdb_bgsave_in_progress")? == 0 {
                return if info.contains("rdb_last_bgsave_status:ok") {
                    Ok(())
                } else {
                    Err("BGSAVE failed; see redis.log".into())
                };
            }
            if Instant::now() > deadline {
                return Err("BGSAVE still running after 600 s".into());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Kills the server (SIGKILL), starts it again on the same port and directory, and
    /// returns how long it took from the start until it had loaded its data and answered.
    pub fn restart(&mut self) -> Result<Duration> {
        self.inner.kill();
        let started = Instant::now();
        catch_unwind(AssertUnwindSafe(|| self.inner.restart_loading()))
            .map_err(|_| "cannot start redis-server again")?;
        let deadline = started + Duration::from_secs(600);
        while self.inner.is_loading() {
            if Instant::now() > deadline {
                return Err("redis-server still loading after 600 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(started.elapsed())
    }

    /// A numeric field of an `INFO` section.
    pub fn info_number(&self, section: &str, field: &str) -> Result<u64> {
        info_field(&self.info(section)?, field)
    }

    /// The text of an `INFO` section.
    fn info(&self, section: &str) -> Result<String> {
        match self.inner.command(&["INFO", section])? {
            Reply::Bulk(Some(bytes)) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            other => Err(format!("INFO {section} replied {other:?}").into()),
        }
    }

    /// `INFO cpu`.
    pub fn cpu(&self) -> Result<CpuTimes> {
        CpuTimes::read(&self.inner)
    }

    /// `used_memory` and `used_memory_dataset` from `INFO memory`.
    pub fn memory(&self) -> Result<MemoryInfo> {
        let info = self.info("memory")?;
        Ok(MemoryInfo {
            used_memory: info_field(&info, "used_memory")?,
            used_memory_dataset: info_field(&info, "used_memory_dataset")?,
        })
    }
}

/// A numeric `name:value` field of an `INFO` reply.
fn info_field(info: &str, name: &str) -> Result<u64> {
    info.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .ok_or_else(|| format!("INFO has no {name} field"))?
        .trim()
        .parse()
        .map_err(|e| format!("INFO field {name}: {e}").into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_fields() -> Result<()> {
        let info =
            "# Memory\r\nused_memory:1024\r\nused_memory_human:1K\r\nused_memory_dataset:96\r\n";
        assert_eq!(info_field(info, "used_memory")?, 1024);
        assert_eq!(info_field(info, "used_memory_dataset")?, 96);
        assert!(info_field(info, "used_memory_peak").is_err());
        Ok(())
    }
}
