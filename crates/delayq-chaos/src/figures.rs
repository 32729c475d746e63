//! What a scenario's fault did (`run --scenario`), read from the run's histories beside the
//! checker's verdict: the sends refused and tried again, by why; how late first deliveries
//! started after their due time (Redis's clock), over the run and while the fault lasted;
//! and when the controller injected what.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use crate::history::{read_all, Event, Fault, Outcome};
use crate::plan;

/// Where the controller writes what it measured of the faults (`controller/scenarios.rs`).
pub const NOTES: &str = "scenario-notes.txt";

/// The figures of the scenario `name` whose histories are in `dir`, as a few lines of text.
pub fn of_scenario(dir: &Path, name: &str) -> Result<String, String> {
    let (events, _) = read_all(dir).map_err(|e| format!("{dir:?}: {e}"))?;
    let mut refused: BTreeMap<String, u64> = BTreeMap::new();
    // When each handler run that failed ended.
    let mut failed: Vec<u64> = Vec::new();
    let mut faults: Vec<(u64, Fault)> = Vec::new();
    // (started, late by ms, message number) of every first delivery.
    let mut first_starts: Vec<(u64, u64, u64)> = Vec::new();
    for event in &events {
        match event {
            Event::Refused { why, .. } => *refused.entry(why.clone()).or_default() += 1,
            Event::Fault { fault, at_us, .. } => faults.push((*at_us, *fault)),
            Event::End {
                outcome: Outcome::Failed,
                at_us,
                ..
            } => failed.push(*at_us),
            Event::Start {
                attempt: 1,
                at_us,
                due_ms,
                n,
                ..
            } => first_starts.push((*at_us, at_us.saturating_sub(due_ms * 1000) / 1000, *n)),
            _ => {}
        }
    }
    faults.sort_by_key(|f| f.0);
    let begun = first_starts.iter().map(|s| s.0).min().unwrap_or(0);
    let mut out = format!("\nscenario {name}: what the fault did\n");
    let _ = writeln!(out, "faults (s after the first delivery):");
    for (at, fault) in &faults {
        let secs = at.saturating_sub(begun) as f64 / 1e6;
        let _ = writeln!(out, "  {secs:7.1}  {fault:?}");
    }
    if let Ok(notes) = std::fs::read_to_string(dir.join(NOTES)) {
        for line in notes.lines() {
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(
        out,
        "sends refused and tried again: {}",
        match refused.is_empty() {
            true => "none".to_owned(),
            false => refused
                .iter()
                .map(|(why, n)| format!("{n} {why}"))
                .collect::<Vec<_>>()
                .join(", "),
        }
    );
    let all: Vec<u64> = first_starts.iter().map(|s| s.1).collect();
    let _ = writeln!(out, "first deliveries late by (ms): {}", lateness(all));
    // While the fault lasted: from the scenario's first fault to its last.
    if let (Some(from), Some(to)) = (faults.first(), faults.last()) {
        let during: Vec<u64> = first_starts
            .iter()
            .filter(|s| s.0 >= from.0 && s.0 <= to.0)
            .map(|s| s.1)
            .collect();
        let _ = writeln!(out, "  of those, during the fault: {}", lateness(during));
        let failed_during = failed.iter().filter(|&&t| t >= from.0 && t <= to.0).count();
        let _ = writeln!(
            out,
            "handler runs that failed: {} ({failed_during} during the fault)",
            failed.len()
        );
    }
    // A priority flood: the flood's first deliveries against the run's own, from the
    // flood's start to its last delivery.
    let flood_from = faults.iter().find(|f| f.1 == Fault::Flood).map(|f| f.0);
    if let Some(from) = flood_from {
        let flood_end = first_starts
            .iter()
            .filter(|s| s.2 >= plan::FLOOD_FROM)
            .map(|s| s.0)
            .max()
            .unwrap_or(from);
        let within = |high: bool| -> Vec<u64> {
            first_starts
                .iter()
                .filter(|s| s.0 >= from && s.0 <= flood_end)
                .filter(|s| (s.2 >= plan::FLOOD_FROM) == high)
                .map(|s| s.1)
                .collect()
        };
        let _ = writeln!(
            out,
            "while the flood was delivered ({:.1} s): priority {} late by {}; the run's own (5) late by {}",
            flood_end.saturating_sub(from) as f64 / 1e6,
            plan::FLOOD_PRIORITY,
            lateness(within(true)),
            lateness(within(false)),
        );
    }
    Ok(out)
}

/// `n, p50, p99, max` of `late` (ms).
fn lateness(mut late: Vec<u64>) -> String {
    if late.is_empty() {
        return "none".into();
    }
    late.sort_unstable();
    let at = |q: f64| late[((late.len() - 1) as f64 * q) as usize];
    format!(
        "{} deliveries, p50 {}, p99 {}, max {}",
        late.len(),
        at(0.5),
        at(0.99),
        late[late.len() - 1]
    )
}
