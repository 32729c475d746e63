//! Redis CPU time per message (issue 10): `INFO cpu` read on every master right before the
//! driver's first command to the agents and again when N deliveries have been counted; the
//! difference of `used_cpu_sys + used_cpu_user` (and of the main thread's pair, where the
//! server reports it) divided by the messages. On a 2-core machine a cluster cannot show more
//! throughput than one node, but this shows whether the work is really spread over the
//! nodes, and what the cluster costs on top.
//!
//! The same two samples read `INFO commandstats`: the commands the server ran per message
//! (issue 33), in all and by command (a script call counts once, as `evalsha`; the
//! commands it runs inside count under their own names, as Redis counts them), the
//! driver's own `INFO` left out.
//!
//! Per node the figure is its CPU over its even share of the messages, `N / masters` (the
//! partitions are placed evenly over the slots, and sends go round robin over them), so a
//! node doing its share at a single node's cost shows the single node's figure. The total is
//! every node's CPU over N.

use std::collections::BTreeMap;
use std::time::Instant;

use redis_fixture::{RedisServer, Reply};
use serde::Serialize;

use crate::error::Result;

/// Every master's `INFO cpu` at one moment.
pub struct Sample {
    at: Instant,
    /// `(port, times)` per master.
    nodes: Vec<(u16, CpuTimes)>,
}

impl Sample {
    /// Timestamps `nodes`, read just now.
    pub fn new(nodes: Vec<(u16, CpuTimes)>) -> Sample {
        Sample {
            at: Instant::now(),
            nodes,
        }
    }
}

/// One node's cumulative CPU seconds, from `INFO cpu`, and commands run, from `INFO
/// commandstats`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuTimes {
    /// `used_cpu_sys + used_cpu_user`: the whole process, seconds.
    pub process_s: f64,
    /// `used_cpu_sys_main_thread + used_cpu_user_main_thread`, where reported (Redis 6.2+).
    pub main_thread_s: Option<f64>,
    /// Calls per command (lowercase, as `cmdstat_<name>` gives it), `info` left out.
    pub calls: BTreeMap<String, u64>,
    /// µs Redis spent running script calls (their `usec`, which includes the commands the
    /// scripts ran): the rest of its CPU went to reading, parsing and answering requests
    /// and to its event loop.
    pub script_usec: u64,
}

impl CpuTimes {
    /// Reads `INFO cpu commandstats` of `server`.
    pub fn read(server: &RedisServer) -> Result<CpuTimes> {
        match server.command(&["INFO", "cpu", "commandstats"])? {
            Reply::Bulk(Some(text)) => CpuTimes::parse(&String::from_utf8_lossy(&text)),
            other => Err(format!("INFO cpu on port {} replied {other:?}", server.port()).into()),
        }
    }

    /// The figures of an `INFO cpu commandstats` reply.
    fn parse(info: &str) -> Result<CpuTimes> {
        let field = |name: &str| -> Result<Option<f64>> {
            match info
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            {
                None => Ok(None),
                Some(v) => v
                    .trim()
                    .parse()
                    .map(Some)
                    .map_err(|e| format!("INFO cpu field {name}: {v:?}: {e}").into()),
            }
        };
        let sum = |a: &str, b: &str| -> Result<Option<f64>> {
            Ok(field(a)?.zip(field(b)?).map(|(a, b)| a + b))
        };
        Ok(CpuTimes {
            process_s: sum("used_cpu_sys", "used_cpu_user")?
                .ok_or("INFO cpu has no used_cpu_sys and used_cpu_user")?,
            main_thread_s: sum("used_cpu_sys_main_thread", "used_cpu_user_main_thread")?,
            calls: command_calls(info, "calls=")?,
            script_usec: command_calls(info, "usec=")?
                .iter()
                .filter(|(name, _)| SCRIPT_CALLS.contains(&name.as_str()))
                .map(|(_, usec)| usec)
                .sum(),
        })
    }
}

impl CpuTimes {
    /// Calls per command between `before` and this sample of the same node.
    pub fn calls_since(&self, before: &CpuTimes) -> BTreeMap<String, u64> {
        self.calls
            .iter()
            .map(|(name, n)| {
                let ran = n.saturating_sub(before.calls.get(name).copied().unwrap_or(0));
                (name.clone(), ran)
            })
            .collect()
    }
}

/// The commands that run a script, as `INFO commandstats` names them.
const SCRIPT_CALLS: [&str; 6] = [
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "fcall",
    "fcall_ro",
];

/// One figure (`field`: `calls=` or `usec=`) of each `cmdstat_<name>:calls=<n>,usec=...`
/// line, `info` (the driver's own samples) left out.
fn command_calls(info: &str, field: &str) -> Result<BTreeMap<String, u64>> {
    let mut calls = BTreeMap::new();
    for line in info.lines() {
        let Some((name, stats)) = line
            .strip_prefix("cmdstat_")
            .and_then(|rest| rest.split_once(':'))
        else {
            continue;
        };
        if name == "info" {
            continue;
        }
        let n = stats
            .split(',')
            .find_map(|kv| kv.strip_prefix(field))
            .ok_or_else(|| format!("INFO commandstats line without {field} {line:?}"))?;
        let n: u64 = n
            .trim()
            .parse()
            .map_err(|e| format!("INFO commandstats {line:?}: {e}"))?;
        calls.insert(name.to_owned(), n);
    }
    Ok(calls)
}

/// One node's part of a measurement.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeCpu {
    /// The node's port on 127.0.0.1.
    pub port: u16,
    /// CPU seconds the node used in the phase (whole process).
    pub cpu_s: f64,
    /// Of which the main thread, where reported.
    pub main_thread_cpu_s: Option<f64>,
    /// µs of CPU per message of its share, `cpu_s / (N / nodes)`.
    pub us_per_msg: f64,
    /// The same for the main thread.
    pub main_thread_us_per_msg: Option<f64>,
}

/// Redis CPU per message over the measured phase of one workload run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RedisCpu {
    /// Messages (N).
    pub messages: u64,
    /// Length of the phase: first command to the agents until N deliveries were counted, s.
    pub phase_s: f64,
    /// Every master (the single server: one entry).
    pub nodes: Vec<NodeCpu>,
    /// Smallest per-node figure, µs per message of a node's share.
    pub node_min_us_per_msg: f64,
    /// Largest per-node figure.
    pub node_max_us_per_msg: f64,
    /// Every node's CPU over N, µs per message.
    pub total_us_per_msg: f64,
    /// The same for the main threads, where every node reports them.
    pub total_main_thread_us_per_msg: Option<f64>,
    /// Commands every node ran in the phase, over N (those a script runs count too).
    pub calls_per_msg: f64,
    /// Of which script calls (`EVALSHA`, `EVAL`, `FCALL` and their read-only forms), over
    /// N: the round trips that pay a script's fixed cost.
    pub script_calls_per_msg: f64,
    /// µs every node spent inside script calls, over N (`INFO commandstats`); the rest of
    /// `total_us_per_msg` is the cost of requests and replies and of the event loop.
    pub script_us_per_msg: f64,
    /// The same by command, most called first.
    pub calls_per_msg_by_command: Vec<(String, f64)>,
}

impl RedisCpu {
    /// The figures between two samples of the same nodes, over `messages`.
    pub fn between(messages: u64, before: &Sample, after: &Sample) -> Result<RedisCpu> {
        let samples = before
            .nodes
            .iter()
            .map(|(port, b)| {
                let a = after.nodes.iter().find(|(p, _)| p == port);
                a.map(|(_, a)| (*port, b.clone(), a.clone()))
                    .ok_or_else(|| format!("node {port} was not sampled after the phase"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let phase_s = after.at.saturating_duration_since(before.at).as_secs_f64();
        RedisCpu::compute(messages, phase_s, &samples)
    }

    /// The figures from `(port, before, after)` of every node, over `messages`.
    fn compute(
        messages: u64,
        phase_s: f64,
        samples: &[(u16, CpuTimes, CpuTimes)],
    ) -> Result<RedisCpu> {
        if messages == 0 || samples.is_empty() {
            return Err("Redis CPU per message needs messages and nodes".into());
        }
        let us = |s: f64, msgs: f64| s * 1e6 / msgs;
        let share = messages as f64 / samples.len() as f64;
        let nodes: Vec<NodeCpu> = samples
            .iter()
            .map(|(port, before, after)| {
                let cpu_s = after.process_s - before.process_s;
                let main_thread_cpu_s = after
                    .main_thread_s
                    .zip(before.main_thread_s)
                    .map(|(a, b)| a - b);
                NodeCpu {
                    port: *port,
                    cpu_s,
                    main_thread_cpu_s,
                    us_per_msg: us(cpu_s, share),
                    main_thread_us_per_msg: main_thread_cpu_s.map(|s| us(s, share)),
                }
            })
            .collect();
        let per_node = nodes.iter().map(|n| n.us_per_msg);
        let main_total: Option<f64> = nodes.iter().map(|n| n.main_thread_cpu_s).sum();
        let mut by_command: BTreeMap<String, u64> = BTreeMap::new();
        for (_, before, after) in samples {
            for (name, ran) in after.calls_since(before) {
                *by_command.entry(name).or_default() += ran;
            }
        }
        let calls: u64 = by_command.values().sum();
        let script_usec: u64 = samples
            .iter()
            .map(|(_, before, after)| after.script_usec.saturating_sub(before.script_usec))
            .sum();
        let script_calls: u64 = by_command
            .iter()
            .filter(|(name, _)| SCRIPT_CALLS.contains(&name.as_str()))
            .map(|(_, n)| n)
            .sum();
        let mut calls_per_msg_by_command: Vec<(String, f64)> = by_command
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(name, n)| (name, n as f64 / messages as f64))
            .collect();
        calls_per_msg_by_command.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        Ok(RedisCpu {
            messages,
            phase_s,
            node_min_us_per_msg: per_node.clone().fold(f64::INFINITY, f64::min),
            node_max_us_per_msg: per_node.fold(f64::NEG_INFINITY, f64::max),
            total_us_per_msg: us(nodes.iter().map(|n| n.cpu_s).sum(), messages as f64),
            total_main_thread_us_per_msg: main_total.map(|s| us(s, messages as f64)),
            calls_per_msg: calls as f64 / messages as f64,
            script_calls_per_msg: script_calls as f64 / messages as f64,
            script_us_per_msg: script_usec as f64 / messages as f64,
            calls_per_msg_by_command,
            nodes,
        })
    }
}

/// A cluster run's figures over the single node's of the same workload and run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CpuVsSingle {
    /// The single node's µs per message.
    pub single_us_per_msg: f64,
    /// Smallest per-node figure / the single node's (target ≤ 1.2 for the largest).
    pub node_min_ratio: f64,
    /// Largest per-node figure / the single node's.
    pub node_max_ratio: f64,
    /// Total / the single node's (target ≤ 1.3).
    pub total_ratio: f64,
}

impl CpuVsSingle {
    /// `cluster` against `single`; `None` when the single figure is zero.
    pub fn new(cluster: &RedisCpu, single: &RedisCpu) -> Option<CpuVsSingle> {
        let base = single.total_us_per_msg;
        (base > 0.0).then(|| CpuVsSingle {
            single_us_per_msg: base,
            node_min_ratio: cluster.node_min_us_per_msg / base,
            node_max_ratio: cluster.node_max_us_per_msg / base,
            total_ratio: cluster.total_us_per_msg / base,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_info_cpu() -> Result<()> {
        let info = "# CPU\r\nused_cpu_sys:1.500000\r\nused_cpu_user:2.250000\r\n\
                    used_cpu_sys_children:0.000000\r\nused_cpu_user_children:0.000000\r\n\
                    used_cpu_sys_main_thread:1.000000\r\nused_cpu_user_main_thread:2.000000\r\n";
        let t = CpuTimes::parse(info)?;
        assert_eq!(t.process_s, 3.75);
        assert_eq!(t.main_thread_s, Some(3.0));
        // Before Redis 6.2 there are no main-thread figures.
        let old = CpuTimes::parse("used_cpu_sys:1.0\r\nused_cpu_user:1.0\r\n")?;
        assert_eq!(old.main_thread_s, None);
        assert!(CpuTimes::parse("used_cpu_sys:1.0\r\n").is_err());
        assert!(CpuTimes::parse("used_cpu_sys:x\r\nused_cpu_user:1.0\r\n").is_err());
        Ok(())
    }

    #[test]
    fn per_message_figures() -> Result<()> {
        let t = |process_s, main| CpuTimes {
            process_s,
            main_thread_s: main,
            calls: BTreeMap::new(),
            script_usec: 0,
        };
        // 1000 messages over 2 nodes: shares of 500.
        let cpu = RedisCpu::compute(
            1000,
            1.0,
            &[
                (1, t(1.0, Some(0.5)), t(1.002, Some(0.5015))),
                (2, t(0.0, Some(0.0)), t(0.001, Some(0.0005))),
            ],
        )?;
        assert!((cpu.nodes[0].us_per_msg - 4.0).abs() < 1e-9);
        assert!((cpu.nodes[1].us_per_msg - 2.0).abs() < 1e-9);
        assert!((cpu.node_min_us_per_msg - 2.0).abs() < 1e-9);
        assert!((cpu.node_max_us_per_msg - 4.0).abs() < 1e-9);
        assert!((cpu.total_us_per_msg - 3.0).abs() < 1e-9);
        assert!((cpu.total_main_thread_us_per_msg.unwrap_or(0.0) - 2.0).abs() < 1e-9);

        let single = RedisCpu::compute(1000, 1.0, &[(3, t(0.0, None), t(0.0025, None))])?;
        assert_eq!(single.total_main_thread_us_per_msg, None);
        let vs = CpuVsSingle::new(&cpu, &single).ok_or("no ratio")?;
        assert!((vs.node_max_ratio - 1.6).abs() < 1e-9);
        assert!((vs.total_ratio - 1.2).abs() < 1e-9);
        assert!(RedisCpu::compute(0, 1.0, &[]).is_err());
        Ok(())
    }

    #[test]
    fn counts_the_commands_run_per_message() -> Result<()> {
        let info = |evalsha: u64, exec: u64| {
            let evalsha_us = evalsha * 2;
            format!(
                "# CPU\r\nused_cpu_sys:1.0\r\nused_cpu_user:1.0\r\n# Commandstats\r\n\
                 cmdstat_evalsha:calls={evalsha},usec={evalsha_us},usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n\
                 cmdstat_exec:calls={exec},usec=5,usec_per_call=1.00\r\n\
                 cmdstat_info:calls=99,usec=5,usec_per_call=1.00\r\n"
            )
        };
        let before = CpuTimes::parse(&info(100, 10))?;
        let after = CpuTimes::parse(&info(400, 60))?;
        assert!(
            !after.calls.contains_key("info"),
            "the driver's own INFO is left out"
        );
        let cpu = RedisCpu::compute(100, 1.0, &[(1, before, after)])?;
        assert!((cpu.calls_per_msg - 3.5).abs() < 1e-9);
        assert!((cpu.script_calls_per_msg - 3.0).abs() < 1e-9);
        // evalsha's usec went from 200 to 800 (exec's is not a script's).
        assert!((cpu.script_us_per_msg - 6.0).abs() < 1e-9);
        assert_eq!(
            cpu.calls_per_msg_by_command,
            vec![("evalsha".to_owned(), 3.0), ("exec".to_owned(), 0.5)]
        );
        Ok(())
    }
}
