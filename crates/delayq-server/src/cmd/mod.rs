//! The commands and their flags.

mod admin;
mod common;
mod push;
mod redis_args;
mod schedule;
mod serve;

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

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Admin(command) => admin::run(command).await,
    }
}
