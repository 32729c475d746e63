//! The commands and their flags, and which module each goes to.
//!
//! Floors, top down (each imports only from below it):
//! * this file: the command line, dispatched to `serve`, `health` (a server's /readyz, the
//!   container's health check), `token` (a token's secret and line for the tokens file),
//!   `keys` (a line of a new key for the key file; a queue's stored payloads sealed again)
//!   or `admin`;
//! * `admin.rs`: the admin commands' flags, each handed to its module;
//! * `audit.rs`, `messages.rs`, `queues.rs`, `dead.rs`, `schedule.rs`, `push.rs`, `format.rs`,
//!   `groups.rs`, `configure.rs`, `events.rs`, `webhooks.rs`: messages (send, get, cancel,
//!   list), queues and processes, dead letters, recurring schedules, push targets, data
//!   formats, groups, settings, the event stream, the URLs a queue's events are sent to;
//!   each builds a request of the HTTP API and prints its answer;
//! * `serve.rs`: the HTTP API, its flags also read from a file by `config_file.rs`, its
//!   tokens by `token_reload.rs` (again on SIGHUP or when the file changes);
//!   `common.rs`: what the admin commands share (flags, printing, text forms);
//! * `api_client.rs`: where a command's request goes (this process's router on Redis, or
//!   a server over HTTP with `--url`);
//! * `redis_args.rs`: where Redis is, as every command is told; `keys_file.rs`: where its
//!   keys are.

mod admin;
mod api_client;
mod audit;
mod common;
pub mod config_file;
mod configure;
mod dead;
mod events;
mod format;
mod groups;
mod health;
mod keys;
mod keys_file;
mod messages;
mod push;
mod queues;
mod redis_args;
mod schedule;
mod serve;
mod token;
mod token_reload;
mod webhooks;

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
    /// Ask a running server whether it is ready (its /readyz): exit 0 when it is. The
    /// container image's health check.
    Health(health::HealthArgs),
    /// Tokens for the tokens file: `create` makes one (its secret, and its hashed line).
    #[command(subcommand)]
    Token(token::TokenCommand),
    /// Keys of payloads encrypted at rest: `new` prints a line of a new key for the key file,
    /// `rotate` seals what a queue stores again with the newest key.
    #[command(subcommand)]
    Keys(keys::KeysCommand),
    #[command(flatten)]
    Admin(admin::AdminCommand),
}

pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Health(args) => health::run(args).await,
        Command::Token(command) => token::run(command),
        Command::Keys(command) => {
            let done = keys::run(command).await;
            common::withdraw_all().await;
            done
        }
        Command::Admin(command) => {
            let done = admin::run(command).await;
            common::withdraw_all().await;
            done
        }
    }
}
