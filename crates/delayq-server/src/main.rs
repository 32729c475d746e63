//! The `delayq` binary: parses flags and hands each command to its module.
//!
//! * `delayq serve`: the HTTP API (`cmd/serve.rs`).
//! * `delayq send | get | cancel | reschedule | stats | queues | pause | resume | configure |
//!   dead`: admin commands that talk to Redis directly (`cmd/admin.rs`); `delayq schedule`
//!   and `delayq push` (`cmd/schedule.rs`, `cmd/push.rs`) are among them.

mod cmd;

// glibc's malloc took about 14 % of the server's CPU under push load (its arena locks and
// consolidation); mimalloc's thread-local free lists do the same work for far less.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cmd::config_file::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("delayq: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cmd::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("delayq: {e:#}");
            ExitCode::FAILURE
        }
    }
}
