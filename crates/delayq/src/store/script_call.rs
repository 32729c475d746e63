//! How a queue script is called: `FCALL` of its function in delayq's Functions library
//! (`scripts.rs`), which is loaded onto a server that lacks it; or `EVALSHA` of the script,
//! on a server that refuses Functions.
//!
//! A server lacks the library after a restart that kept no data, a `FUNCTION FLUSH`, or on a
//! cluster node that was added or emptied; `FLUSHALL` keeps it, and replicas get it with
//! everything else, so a promoted replica has it. Whoever calls first after that loads it
//! (`FUNCTION LOAD REPLACE`: on a cluster, on every master) and calls again: a call that
//! found no function ran nothing. Loading the same library twice is harmless, so callers
//! that race need no lock.
//!
//! A server that refuses `FUNCTION LOAD` or `FCALL` (an ACL without them, a managed service
//! that turns them off) makes this client use `EVALSHA` from then on, once, with a warning:
//! everything works, each call costs the server more.

use std::sync::atomic::{AtomicBool, Ordering};

use redis::aio::ConnectionLike;
use redis::{Cmd, RedisError, RedisResult, ServerErrorKind, ToRedisArgs, Value};

use crate::store::keys::Keys;
use crate::store::scripts::{QueueScript, SCRIPTS};
use crate::values::receipt::Held;

/// A call of a queue script on one partition, its keys and arguments in place.
pub(crate) struct Call<'a> {
    script: &'a QueueScript,
    keys: Vec<Vec<u8>>,
    args: Cmd,
    /// The partition's control hash, which names its data format.
    pub(crate) control: String,
}

/// A call of `script` on partition `keys`, its arguments still to add.
pub(crate) fn invocation<'a>(keys: &Keys, script: &'a QueueScript) -> Call<'a> {
    let mut call = Call {
        script,
        keys: Vec::with_capacity(keys.all().len() + 1),
        args: Cmd::new(),
        control: keys.control().to_owned(),
    };
    for key in keys.all() {
        call.key(key);
    }
    call
}

impl Call<'_> {
    /// Adds a key (after the partition's).
    pub(crate) fn key(&mut self, key: impl ToRedisArgs) -> &mut Self {
        self.keys.extend(key.to_redis_args());
        self
    }

    /// The argument `ack.lua` (and a claim that carries acks) takes for one delivery: its
    /// lease member, then its id if the caller chose it (a generated id follows from the
    /// held record, so it is not sent).
    pub(crate) fn ack_of(&mut self, held: &impl Held) -> &mut Self {
        let member = held.lease_member();
        if held.explicit_id() {
            let mut arg = Vec::with_capacity(member.len() + held.id().len());
            arg.extend_from_slice(&member);
            arg.extend_from_slice(held.id().as_bytes());
            self.arg(arg)
        } else {
            self.arg(&member[..])
        }
    }

    /// Adds an argument.
    pub(crate) fn arg(&mut self, arg: impl ToRedisArgs) -> &mut Self {
        self.args.arg(arg);
        self
    }

    /// The call as one command: `FCALL` of its function, or `EVALSHA` of its script.
    pub(crate) fn command(&self, functions: bool) -> Cmd {
        let mut cmd = if functions {
            let mut cmd = redis::cmd("FCALL");
            cmd.arg(&self.script.function);
            cmd
        } else {
            let mut cmd = redis::cmd("EVALSHA");
            cmd.arg(self.script.script().get_hash());
            cmd
        };
        cmd.arg(self.keys.len()).arg(&self.keys);
        for arg in self.args.args_iter() {
            if let redis::Arg::Simple(bytes) = arg {
                cmd.arg(bytes);
            }
        }
        cmd
    }

    /// Puts the script on the server: the library for `FCALL`, the script for `EVALSHA`.
    pub(crate) async fn load(
        &self,
        conn: &mut impl ConnectionLike,
        functions: bool,
    ) -> RedisResult<()> {
        if functions {
            redis::cmd("FUNCTION")
                .arg("LOAD")
                .arg("REPLACE")
                .arg(&SCRIPTS.library.code)
                .query_async::<Value>(conn)
                .await?;
        } else {
            self.script
                .script()
                .prepare_invoke()
                .load_async(conn)
                .await?;
        }
        Ok(())
    }
}

/// Whether this client calls functions (until a server refuses them).
#[derive(Default)]
pub(crate) struct Scripting {
    refused: AtomicBool,
}

/// What the server said about a call.
enum Missing {
    /// The call ran (or failed for a reason of its own).
    No,
    /// No such function or script: nothing ran.
    Yes,
    /// The server refuses functions.
    Refused,
}

impl Scripting {
    /// Whether calls go by `FCALL`.
    pub(crate) fn functions(&self) -> bool {
        !self.refused.load(Ordering::Relaxed)
    }

    /// Calls go by `EVALSHA` from now on, because of `e`.
    fn refuse(&self, e: &RedisError) {
        if !self.refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                error = %e,
                "the Redis server refuses Functions: delayq calls its scripts by EVALSHA, \
                 which costs the server more per call"
            );
        }
    }

    /// Runs `call`, loading what the server lacks and calling again.
    pub(crate) async fn invoke(
        &self,
        conn: &mut impl ConnectionLike,
        call: &Call<'_>,
    ) -> RedisResult<Value> {
        let mut loaded = false;
        loop {
            let functions = self.functions();
            match call.command(functions).query_async::<Value>(conn).await {
                Ok(value) => return Ok(value),
                Err(e) => self.recover(conn, call, functions, e, &mut loaded).await?,
            }
        }
    }

    /// After `call`, sent by `FCALL` if `functions` (else `EVALSHA`), failed with `e`: `Ok`
    /// if it may be sent again, because what the server lacked is loaded now (once per call,
    /// `loaded`) or because the server refuses Functions; else the error to give up with.
    pub(crate) async fn recover(
        &self,
        conn: &mut impl ConnectionLike,
        call: &Call<'_>,
        functions: bool,
        e: RedisError,
        loaded: &mut bool,
    ) -> RedisResult<()> {
        match missing(&e) {
            Missing::Refused if functions => {
                self.refuse(&e);
                Ok(())
            }
            Missing::Yes if !*loaded => {
                *loaded = true;
                match call.load(conn, functions).await {
                    Err(e) if functions && matches!(missing(&e), Missing::Refused) => {
                        self.refuse(&e);
                        Ok(())
                    }
                    loading => loading,
                }
            }
            _ => Err(e),
        }
    }
}

/// Whether error `e` of a call means that the function or script was not there to run.
fn missing(e: &RedisError) -> Missing {
    let detail = e.detail().unwrap_or("").to_ascii_lowercase();
    let names_functions = detail.contains("fcall") || detail.contains("function");
    match e.kind() {
        redis::ErrorKind::Server(ServerErrorKind::NoScript) => Missing::Yes,
        redis::ErrorKind::Server(ServerErrorKind::NoPerm) if names_functions => Missing::Refused,
        redis::ErrorKind::Server(ServerErrorKind::NoPerm) => Missing::No,
        _ if detail.contains("function not found") => Missing::Yes,
        _ if detail.contains("unknown command") && names_functions => Missing::Refused,
        _ => Missing::No,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The error a server's reply `text` (`-text` on the wire) becomes.
    fn server_error(text: &str) -> RedisError {
        match redis::parse_redis_value(format!("-{text}\r\n").as_bytes()) {
            Ok(Value::ServerError(e)) => e.into(),
            other => panic!("{text}: parsed as {other:?}"),
        }
    }

    #[test]
    fn what_a_failed_call_means() {
        // What Redis 7 and Valkey answer.
        let yes = ["ERR Function not found", "NOSCRIPT No matching script."];
        let refused = [
            "NOPERM User u has no permissions to run the 'fcall' command",
            "NOPERM User u has no permissions to run the 'function|load' command",
            "ERR unknown command 'FCALL', with args beginning with: ",
        ];
        let no = [
            "ERR delayq: bad due time",
            "NOPERM No permissions to access a key",
            "OOM command not allowed when used memory > 'maxmemory'.",
        ];
        for text in yes {
            assert!(
                matches!(missing(&server_error(text)), Missing::Yes),
                "{text}"
            );
        }
        for text in refused {
            assert!(
                matches!(missing(&server_error(text)), Missing::Refused),
                "{text}"
            );
        }
        for text in no {
            assert!(
                matches!(missing(&server_error(text)), Missing::No),
                "{text}"
            );
        }
    }
}
