//! The admin commands and their flags, and which module runs each. Every command is a
//! request of the HTTP API (`api_client.rs`: in this process, or to a server with `--url`),
//! answered as a readable table for a person or as the API's JSON (`--json`) for scripts.
//! Exit code 0 on success; otherwise one line on stderr (printed by `main.rs`) and a
//! non-zero code.

use std::time::Duration;

use super::common::Common;

/// The admin commands.
#[derive(clap::Subcommand)]
pub enum AdminCommand {
    /// Send a message.
    Send(super::messages::SendArgs),
    /// Show one message.
    Get {
        #[command(flatten)]
        common: Common,
        queue: String,
        id: String,
    },
    /// Cancel delayed or ready messages: by id (one or more), or every message of --state
    /// (delayed or ready), those whose payload or id contains --contains only if given.
    Cancel(super::messages::CancelArgs),
    /// List one state's messages a page at a time (--cursor from the page before), or
    /// search them (--contains).
    List(super::messages::ListArgs),
    /// The audit log, newest first: who did what (admin and destructive actions, refused
    /// attempts too), through what, on which queue and ids, from where, and the outcome.
    Audit(super::audit::AuditArgs),
    /// The processes using this Redis (servers, workers and other library clients), each
    /// with when it was last seen and the newest data format it reads.
    Processes {
        #[command(flatten)]
        common: Common,
    },
    /// Move a delayed or ready message to a new due time.
    Reschedule {
        #[command(flatten)]
        common: Common,
        queue: String,
        id: String,
        /// Due this long from now (e.g. 15m).
        #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "at", required_unless_present = "at")]
        delay: Option<Duration>,
        /// Due at this time (RFC 3339).
        #[arg(long, value_parser = delayq_server::rfc3339::system_time)]
        at: Option<std::time::SystemTime>,
    },
    /// Counts per state of one queue, or of every queue.
    Stats {
        #[command(flatten)]
        common: Common,
        queue: Option<String>,
    },
    /// The queues in this Redis.
    Queues {
        #[command(flatten)]
        common: Common,
    },
    /// Create a queue spread over several partitions (hash tags; on a Redis Cluster, spread
    /// over the masters). A queue is otherwise created with one partition by its first use,
    /// and its partition count never changes.
    CreateQueue {
        #[command(flatten)]
        common: Common,
        queue: String,
        /// How many partitions (1 to 256).
        #[arg(long)]
        partitions: u16,
    },
    /// Delete a queue: its settings, schedules, events, history, push target and webhooks,
    /// in batches of a bounded size. Refused while it holds messages unless --force, which
    /// deletes them too.
    DeleteQueue {
        #[command(flatten)]
        common: Common,
        queue: String,
        /// Delete the messages it holds too (pending, in flight and dead).
        #[arg(long)]
        force: bool,
    },
    /// Pause a queue: no consumer is given a message until it is resumed. Sends are still
    /// accepted; messages in flight settle as usual.
    Pause {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Resume a paused queue.
    Resume {
        #[command(flatten)]
        common: Common,
        queue: String,
    },
    /// Change a queue's settings.
    Configure(super::configure::ConfigureArgs),
    /// A queue's events (each change of a message's state), or --follow them live.
    Events(super::events::EventsArgs),
    /// Dead letters: list, requeue, purge.
    #[command(subcommand)]
    Dead(super::dead::DeadCommand),
    /// Recurring schedules: put, get, list, delete.
    #[command(subcommand)]
    Schedule(super::schedule::ScheduleCommand),
    /// Push delivery: set, get, remove a queue's push target.
    #[command(subcommand)]
    Push(super::push::PushCommand),
    /// Webhooks: add, list, remove the URLs a queue's events are sent to.
    #[command(subcommand)]
    Webhooks(super::webhooks::WebhooksCommand),
    /// Data formats: show each queue's and the processes running, upgrade queues.
    #[command(subcommand)]
    Format(super::format::FormatCommand),
    /// Groups: list a queue's, show one, pause, resume or set one's concurrency and weight.
    #[command(subcommand)]
    Groups(super::groups::GroupsCommand),
}

pub async fn run(command: AdminCommand) -> anyhow::Result<()> {
    use super::{dead, messages, queues};
    match command {
        AdminCommand::Send(args) => messages::send(args).await,
        AdminCommand::Get { common, queue, id } => messages::get(common, queue, id).await,
        AdminCommand::Cancel(args) => messages::cancel(args).await,
        AdminCommand::List(args) => messages::list(args).await,
        AdminCommand::Reschedule {
            common,
            queue,
            id,
            delay,
            at,
        } => messages::reschedule(common, queue, id, delay, at).await,
        AdminCommand::Stats { common, queue } => queues::stats(common, queue).await,
        AdminCommand::Queues { common } => queues::queues(common).await,
        AdminCommand::Processes { common } => queues::processes(common).await,
        AdminCommand::Audit(args) => super::audit::run(args).await,
        AdminCommand::CreateQueue {
            common,
            queue,
            partitions,
        } => queues::create(common, queue, partitions).await,
        AdminCommand::DeleteQueue {
            common,
            queue,
            force,
        } => queues::delete(common, queue, force).await,
        AdminCommand::Pause { common, queue } => queues::set_paused(common, queue, true).await,
        AdminCommand::Resume { common, queue } => queues::set_paused(common, queue, false).await,
        AdminCommand::Configure(args) => super::configure::run(args).await,
        AdminCommand::Events(args) => super::events::run(args).await,
        AdminCommand::Dead(dead) => dead::run(dead).await,
        AdminCommand::Schedule(command) => super::schedule::run(command).await,
        AdminCommand::Push(command) => super::push::run(command).await,
        AdminCommand::Webhooks(command) => super::webhooks::run(command).await,
        AdminCommand::Format(command) => super::format::run(command).await,
        AdminCommand::Groups(command) => super::groups::run(command).await,
    }
}
