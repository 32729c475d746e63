//! The commands and their flags.

mod admin;
mod serve;

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// delayq: a reliable delayed-message queue on Redis.
#[derive(Parser)]
#[command(name = "delayq", version, about)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the HTTP API (with a private, durable Redis unless --redis-url is given).
    Serve(serve::ServeArgs),
    #[command(flatten)]
    Admin(admin::AdminCommand),
}

/// Where Redis is, for every command.
#[derive(clap::Args, Clone)]
pub struct RedisArgs {
    /// Use this Redis (redis://, rediss:// for TLS, redis+unix://; user:password@ for ACLs;
    /// /N for a database). Without it: the embedded Redis of --data-dir.
    #[arg(long, env = "DELAYQ_REDIS_URL", global = true)]
    redis_url: Option<String>,
    /// Data directory of the embedded Redis.
    #[arg(long, default_value = "delayq-data", global = true)]
    data_dir: PathBuf,
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Admin(command) => admin::run(command).await,
    }
}
