//! `delayq format ...`: the data format of each queue, the processes using this Redis with
//! the newest format each reads, and the upgrade of queues to this delayq's newest format
//! (README, "Upgrading").

use anyhow::bail;
use delayq::{DelayQ, Process, QueueFormat, DATA_FORMAT};
use serde_json::{json, Value};

use super::common::{print, Common};

/// Data format commands.
#[derive(clap::Subcommand)]
pub enum FormatCommand {
    /// Each queue's data format and upgrade progress (or QUEUE's), and the processes running.
    Show {
        #[command(flatten)]
        common: Common,
        queue: Option<String>,
    },
    /// Upgrade queues to this delayq's newest data format. Nothing is rewritten and
    /// deliveries go on; refused while a process that reads only older formats runs.
    Upgrade {
        #[command(flatten)]
        common: Common,
        /// The queues to upgrade.
        #[arg(required_unless_present = "all", conflicts_with = "all")]
        queues: Vec<String>,
        /// Every queue.
        #[arg(long)]
        all: bool,
    },
}

pub async fn run(command: FormatCommand) -> anyhow::Result<()> {
    match command {
        FormatCommand::Show { common, queue } => {
            let dq = common.connect().await?;
            let names = match queue {
                Some(q) => vec![q],
                None => queue_names(&dq).await?,
            };
            let mut rows = Vec::new();
            for name in names {
                let format = dq.queue(&name)?.data_format().await?;
                rows.push((name, format));
            }
            let processes = dq.processes().await?;
            dq.withdraw().await?;
            let out = json!({
                "newest": DATA_FORMAT,
                "queues": rows.iter().map(|(n, f)| format_json(n, f)).collect::<Vec<_>>(),
                "processes": processes.iter().map(process_json).collect::<Vec<_>>(),
            });
            print(&common, &out, || {
                format!(
                    "{}\n\n{}",
                    formats_table(&rows),
                    processes_table(&processes)
                )
            })
        }
        FormatCommand::Upgrade {
            common,
            queues,
            all,
        } => {
            let dq = common.connect().await?;
            // This process reads the newest format: its own announcement never holds the
            // upgrade up; taken back at the end, it is not listed for a lease after.
            let names = if all { queue_names(&dq).await? } else { queues };
            let mut rows = Vec::new();
            for name in names {
                match dq.queue(&name)?.upgrade_format().await {
                    Ok(format) => rows.push((name, format)),
                    Err(e) => {
                        dq.withdraw().await?;
                        bail!("{name}: {e}");
                    }
                }
            }
            dq.withdraw().await?;
            let out = json!({
                "newest": DATA_FORMAT,
                "queues": rows.iter().map(|(n, f)| format_json(n, f)).collect::<Vec<_>>(),
            });
            print(&common, &out, || formats_table(&rows))
        }
    }
}

async fn queue_names(dq: &DelayQ) -> anyhow::Result<Vec<String>> {
    Ok(dq.queues().await?.iter().map(|q| q.to_string()).collect())
}

fn format_json(name: &str, f: &QueueFormat) -> Value {
    json!({
        "queue": name, "format": f.format(), "partitions": f.partitions,
        "upgraded": f.upgraded(), "current": f.is_current(),
    })
}

fn process_json(p: &Process) -> Value {
    json!({ "name": p.name, "newest_format": p.newest_format, "lease_left_ms": p.lease_left_ms })
}

fn formats_table(rows: &[(String, QueueFormat)]) -> String {
    let mut t = format!(
        "{:<32} {:>6}  {:<24}  newest: {DATA_FORMAT}",
        "QUEUE", "FORMAT", "UPGRADED"
    );
    for (name, f) in rows {
        let progress = if f.partitions.is_empty() {
            "not used yet".to_owned()
        } else {
            format!("{} of {} partition(s)", f.upgraded(), f.partitions.len())
        };
        t.push_str(&format!("\n{name:<32} {:>6}  {progress:<24}", f.format()));
    }
    t
}

fn processes_table(processes: &[Process]) -> String {
    let mut t = format!("{:<48} {:>14}  {}", "PROCESS", "READS UP TO", "LEASE");
    for p in processes {
        let lease = if p.lease_left_ms > 0 {
            format!("{:.1}s left", p.lease_left_ms as f64 / 1000.0)
        } else {
            format!("ran out {:.1}s ago", -p.lease_left_ms as f64 / 1000.0)
        };
        t.push_str(&format!(
            "\n{:<48} {:>14}  {lease}",
            p.name,
            format!("format {}", p.newest_format)
        ));
    }
    t
}
