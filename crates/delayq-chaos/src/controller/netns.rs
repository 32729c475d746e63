//! Hosts of their own for a chaos run's processes: a network namespace each (`ip netns`,
//! from Debian's iproute2), joined to the run's host by a veth pair, with an nftables table
//! (Debian's nftables) that partitions it: packets dropped, not refused, so connections
//! stay open and TCP retransmits until the partition heals, as across a real network.
//!
//! Host `n` is `10.201.n.2`; the run's side of its link is `10.201.n.1`, where Redis also
//! listens (the run's Redis binds those addresses besides loopback).

use std::process::Command;

/// One namespace and its link, deleted when dropped.
pub(super) struct Host {
    name: String,
    index: u8,
}

impl Host {
    /// Makes host `index` (1 to 250) for this run.
    pub(super) fn create(index: u8) -> Result<Host, String> {
        let name = format!("dqchaos-{}-{index}", std::process::id());
        let host = Host { name, index };
        let (outer, inner) = (host.outer_link(), format!("dqi{index}"));
        ip(&["netns", "add", &host.name])?;
        ip(&[
            "link", "add", &outer, "type", "veth", "peer", "name", &inner, "netns", &host.name,
        ])?;
        ip(&[
            "addr",
            "add",
            &format!("{}/24", host.outer_ip()),
            "dev",
            &outer,
        ])?;
        ip(&["link", "set", &outer, "up"])?;
        host.exec_ip(&["addr", "add", &format!("{}/24", host.ip()), "dev", &inner])?;
        host.exec_ip(&["link", "set", &inner, "up"])?;
        host.exec_ip(&["link", "set", "lo", "up"])?;
        host.nft(&["add", "table", "inet", "chaos"])?;
        for (chain, hook) in [("in", "input"), ("out", "output")] {
            let spec = format!("{{ type filter hook {hook} priority 0; policy accept; }}");
            host.nft(&["add", "chain", "inet", "chaos", chain, &spec])?;
        }
        Ok(host)
    }

    /// This host's address.
    pub(super) fn ip(&self) -> String {
        format!("10.201.{}.2", self.index)
    }

    /// The run's side of the link: where this host reaches Redis.
    pub(super) fn outer_ip(&self) -> String {
        format!("10.201.{}.1", self.index)
    }

    fn outer_link(&self) -> String {
        format!("dqo{}-{}", std::process::id() % 10_000, self.index)
    }

    /// What a command is prefixed with to run on this host.
    pub(super) fn prefix(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.name].map(String::from).into()
    }

    /// Drops every packet between this host and TCP port `port` of the run's side (Redis),
    /// both ways; the rest goes on.
    pub(super) fn cut_from_port(&self, port: u16) -> Result<(), String> {
        let (port, peer) = (port.to_string(), self.outer_ip());
        self.nft(&[
            "add", "rule", "inet", "chaos", "out", "ip", "daddr", &peer, "tcp", "dport", &port,
            "drop",
        ])?;
        self.nft(&[
            "add", "rule", "inet", "chaos", "in", "ip", "saddr", &peer, "tcp", "sport", &port,
            "drop",
        ])
    }

    /// Drops every packet in and out of this host but its own loopback.
    pub(super) fn cut_off(&self) -> Result<(), String> {
        for chain in ["in", "out"] {
            let dev = if chain == "in" { "iifname" } else { "oifname" };
            self.nft(&[
                "add", "rule", "inet", "chaos", chain, dev, "!=", "lo", "drop",
            ])?;
        }
        Ok(())
    }

    /// Ends every partition of this host.
    pub(super) fn heal(&self) -> Result<(), String> {
        for chain in ["in", "out"] {
            self.nft(&["flush", "chain", "inet", "chaos", chain])?;
        }
        Ok(())
    }

    fn exec_ip(&self, args: &[&str]) -> Result<(), String> {
        let mut all = vec!["netns", "exec", &self.name, "ip"];
        all.extend(args);
        ip(&all)
    }

    fn nft(&self, args: &[&str]) -> Result<(), String> {
        run(
            "ip",
            &[&["netns", "exec", &self.name, "nft"], args].concat(),
        )
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deletes the namespace's end of the link, and with it the run's end.
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

fn ip(args: &[&str]) -> Result<(), String> {
    run("ip", args)
}

fn run(program: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e} (network scenarios need iproute2 and nftables)"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {}: {} (network scenarios run as root)",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}
