//! `delayq token create`: a new token for the tokens file. It prints the token's secret
//! (shown once: give it to the client) and the line to add to the file, which holds only the
//! secret's SHA-256, the token's name, role and queues. Nothing is sent anywhere: a running
//! server takes the line when the file is saved (or on SIGHUP).

use std::io::Read;

use anyhow::{bail, Context};
use delayq_server::auth::{hashed_line, new_secret, Scope};

#[derive(clap::Subcommand)]
pub enum TokenCommand {
    /// Make a token: prints its secret and its line for the tokens file.
    Create(CreateArgs),
}

#[derive(clap::Args)]
pub struct CreateArgs {
    /// Its name, which logs and the audit log show (never the secret): 1 to 64 of A-Z,
    /// a-z, 0-9, '.', '_', '-'.
    #[arg(long)]
    name: String,
    /// send, consume, admin or monitor.
    #[arg(long)]
    role: String,
    /// The queues it may use: names and prefix patterns (`orders.*`), comma-separated.
    /// Default: every queue.
    #[arg(long)]
    queues: Option<String>,
    /// Take the secret from standard input instead of making one: to move a token of the
    /// `role:secret` form to a hashed line without changing what its clients present.
    #[arg(long)]
    secret_stdin: bool,
}

pub fn run(command: TokenCommand) -> anyhow::Result<()> {
    let TokenCommand::Create(args) = command;
    let scope = match &args.queues {
        Some(list) => Scope::parse(list).map_err(|e| anyhow::anyhow!("--queues: {e}"))?,
        None => Scope::default(),
    };
    let (secret, made) = match args.secret_stdin {
        true => {
            let mut text = String::new();
            std::io::stdin()
                .read_to_string(&mut text)
                .context("reading the secret from standard input")?;
            (text.trim().to_owned(), false)
        }
        false => (new_secret(), true),
    };
    let line = match hashed_line(&args.name, &args.role, &scope, &secret) {
        Ok(line) => line,
        Err(e) => bail!("{e}"),
    };
    if made {
        println!("token: {secret}");
    }
    println!("line:  {line}");
    Ok(())
}
