//! Every shell sample of the docs book (a ```sh, ```bash, ```shell or ```console block of
//! docs/*.md) runs in CI or says why not: a session script (docs/run-*.sh, run by .ci/run)
//! runs it with a line `block PAGE N`, or the line directly above its fence is
//! `<!-- not run in CI: REASON -->`. Blocks are counted per page from 1 over all four
//! kinds, as the scripts' `block` helper counts them. A script that names a block the page
//! does not have fails too, and so does a script that .ci/run does not run.

use std::path::{Path, PathBuf};

const SHELLS: [&str; 4] = ["sh", "bash", "shell", "console"];
const MARKER: &str = "<!-- not run in CI:";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The files of docs/ whose names start with `prefix` and end with `suffix`, sorted.
fn docs_files(prefix: &str, suffix: &str) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter_map(|p| Some((p.file_name()?.to_str()?.to_owned(), p)))
        .filter(|(name, _)| name.starts_with(prefix) && name.ends_with(suffix))
        .map(|(name, p)| (name, std::fs::read_to_string(p).expect("a file of docs/")))
        .collect();
    files.sort();
    files
}

/// A shell block of a page: its number, its first line, and what the line above its fence
/// says when it is a not-run marker (its reason, trimmed: empty if it gives none).
struct Sample {
    number: usize,
    first_line: String,
    not_run: Option<String>,
}

/// The shell blocks of a page. A fence is a line of leading spaces then three backticks (as
/// the scripts' awk finds it); a shell block's info string starts with one of `SHELLS`.
fn samples(text: &str) -> Vec<Sample> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut inside = false;
    for (i, line) in lines.iter().enumerate() {
        let Some(info) = line.trim_start_matches(' ').strip_prefix("```") else {
            continue;
        };
        inside = !inside;
        let kind = info.split_whitespace().next().unwrap_or("");
        if !inside || !SHELLS.contains(&kind) {
            continue;
        }
        let above = if i == 0 { "" } else { lines[i - 1].trim() };
        let not_run = above
            .strip_prefix(MARKER)
            .and_then(|rest| rest.strip_suffix("-->"))
            .map(|reason| reason.trim().to_owned());
        out.push(Sample {
            number: out.len() + 1,
            first_line: lines.get(i + 1).map_or("", |l| l.trim()).to_owned(),
            not_run,
        });
    }
    out
}

/// Each `block PAGE N` of the session scripts' lines (comments left out): script, page, N.
fn runs() -> Vec<(String, String, usize)> {
    let mut runs = Vec::new();
    for (script, text) in docs_files("run-", ".sh") {
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(3) {
                let page = w[1].ends_with(".md");
                if let ("block", true, Ok(n)) = (w[0], page, w[2].parse::<usize>()) {
                    runs.push((script.clone(), w[1].to_owned(), n));
                }
            }
        }
    }
    runs
}

#[test]
fn every_shell_sample_is_run_in_ci_or_says_why_not() {
    let runs = runs();
    let mut count = 0;
    let mut problems = Vec::new();
    for (page, text) in docs_files("", ".md") {
        for s in samples(&text) {
            count += 1;
            let at = format!("docs/{page}, shell block {} (`{}`)", s.number, s.first_line);
            let run_by: Vec<&str> = runs
                .iter()
                .filter(|(_, p, n)| *p == page && *n == s.number)
                .map(|(script, _, _)| script.as_str())
                .collect();
            match (&s.not_run, run_by.first()) {
                (None, None) => problems.push(format!(
                    "{at}: not run by a docs/run-*.sh script: run it there (`block {page} {}`), \
                     or put `{MARKER} <why> -->` on the line directly above its fence",
                    s.number
                )),
                (Some(reason), None) if reason.is_empty() => problems.push(format!(
                    "{at}: its not-run marker gives no reason: say why CI cannot run it"
                )),
                (Some(_), Some(script)) => problems.push(format!(
                    "{at}: marked not run in CI, but docs/{script} runs it: remove the marker"
                )),
                _ => {}
            }
        }
    }
    assert!(count >= 10, "only {count} shell blocks found in docs/*.md");
    assert!(problems.is_empty(), "\n{}", problems.join("\n"));
}

#[test]
fn every_block_a_session_script_runs_is_on_its_page() {
    let runs = runs();
    assert!(runs.len() >= 10, "only {} `block` lines found", runs.len());
    let root = root();
    let mut stale = Vec::new();
    for (script, page, n) in &runs {
        let have = std::fs::read_to_string(root.join("docs").join(page))
            .map(|text| samples(&text).len())
            .unwrap_or(0);
        if *n == 0 || *n > have {
            stale.push(format!(
                "docs/{script}: `block {page} {n}`, but docs/{page} has {have} shell blocks: \
                 number the block as the page has it now"
            ));
        }
    }
    assert!(stale.is_empty(), "\n{}", stale.join("\n"));
}

#[test]
fn ci_runs_every_session_script() {
    let ci = std::fs::read_to_string(root().join(".ci/run")).expect(".ci/run");
    let scripts = docs_files("run-", ".sh");
    assert!(!scripts.is_empty(), "no docs/run-*.sh script found");
    for (script, _) in scripts {
        let path = format!("docs/{script}");
        let run = ci
            .lines()
            .any(|l| !l.trim_start().starts_with('#') && l.contains(&path));
        assert!(
            run,
            "{path} is not run by .ci/run: add it there, as `{path} \"$target/release/delayq\"`"
        );
    }
}
