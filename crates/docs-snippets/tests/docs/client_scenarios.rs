//! Every client passes the same scenarios (clients/SCENARIOS.md): each scenario id of that
//! table (`S1`, `S2`, ...) names a test of each client, found by the line that declares it
//! (`test('S1 ...'` in TypeScript, `def test_S1_...` in Python, `func TestS1_...` in Go).
//! The tests themselves run in each client's CI against a real server; this keeps the list
//! and the clients from drifting apart.

use std::path::{Path, PathBuf};

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients")
}

/// The scenario ids of SCENARIOS.md's table, in order.
fn scenario_ids() -> Vec<String> {
    let text = std::fs::read_to_string(clients().join("SCENARIOS.md")).expect("SCENARIOS.md");
    text.lines()
        .filter_map(|line| line.strip_prefix("| S"))
        .filter_map(|rest| rest.split_once(' '))
        .filter(|(n, _)| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        .map(|(n, _)| format!("S{n}"))
        .collect()
}

/// The text of every file under `dir` whose name ends with one of `suffixes` (skipping
/// node_modules, virtual environments and build output).
fn sources(dir: &Path, suffixes: &[&str]) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if !["node_modules", ".venv", "dist", "build", ".git"].contains(&name.as_str()) {
                out.extend(sources(&path, suffixes));
            }
        } else if suffixes.iter().any(|s| name.ends_with(s)) {
            if let Ok(text) = std::fs::read_to_string(&path) {
                out.push((path, text));
            }
        }
    }
    out
}

/// Whether a line declares a test named for scenario `id`.
fn declares(line: &str, id: &str) -> bool {
    let line = line.trim_start();
    let ts = line.starts_with("test(") && line.contains(&format!("'{id} "));
    let py = line.starts_with(&format!("def test_{id}_"))
        || line.starts_with(&format!("async def test_{id}_"));
    let go = line.starts_with(&format!("func Test{id}_"));
    ts || py || go
}

#[test]
fn every_client_has_a_test_for_every_scenario() {
    let ids = scenario_ids();
    assert!(ids.len() >= 9, "SCENARIOS.md lists its scenarios: {ids:?}");
    let suites = [
        ("typescript", "test", &[".test.js", ".test.ts"][..]),
        ("python", "tests", &[".py"][..]),
        ("go", "", &["_test.go"][..]),
    ];
    let mut missing = Vec::new();
    for (client, tests, suffixes) in suites {
        let files = sources(&clients().join(client).join(tests), suffixes);
        assert!(!files.is_empty(), "clients/{client}: no test files found");
        for id in &ids {
            let found = files
                .iter()
                .any(|(_, text)| text.lines().any(|line| declares(line, id)));
            if !found {
                missing.push(format!("{client} {id}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "clients without a test for a scenario of clients/SCENARIOS.md (name the test for \
         its id): {missing:?}"
    );
}
