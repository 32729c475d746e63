//! Takes every ```rust block out of the docs (`docs/*.md`) and wraps each in an async fn
//! with the bindings samples assume (a client `dq`, queues `orders`, `reminders`, ...),
//! for `src/lib.rs` to compile in its tests. A sample that no longer compiles against the
//! library fails the build of the tests, naming its file and line.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
    println!("cargo:rerun-if-changed={}", docs.display());
    let mut pages: Vec<_> = std::fs::read_dir(&docs)
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    pages.sort();
    let mut out = String::new();
    let mut count = 0;
    for page in pages {
        println!("cargo:rerun-if-changed={}", page.display());
        let text = std::fs::read_to_string(&page).expect("a docs page");
        let name = page
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("?")
            .to_owned();
        let mut sample: Option<(usize, String)> = None;
        for (i, line) in text.lines().enumerate() {
            match &mut sample {
                None if line.trim_start() == "```rust" => sample = Some((i + 2, String::new())),
                Some((from, body)) if line.trim_start() == "```" => {
                    count += 1;
                    let duration = if body.contains("use std::time::Duration;") {
                        ""
                    } else {
                        "use std::time::Duration;"
                    };
                    let _ = writeln!(
                        out,
                        "/// docs/{name}, line {from}.\n\
                         async fn sample_{count}(dq: DelayQ, orders: Queue, reminders: Queue, \
                         alerts: Queue, search: Queue, saved_cursor: EventCursor, \
                         new_time_ms: u64) -> Result<(), Box<dyn std::error::Error>> {{\n\
                         {duration}\n{body}\n#[allow(unreachable_code)]\nOk(())\n}}\n"
                    );
                    sample = None;
                }
                Some((_, body)) => {
                    body.push_str(line);
                    body.push('\n');
                }
                None => {}
            }
        }
    }
    let _ = writeln!(
        out,
        "/// Samples compiled.\npub const SAMPLES: usize = {count};"
    );
    let dest = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("samples.rs");
    std::fs::write(dest, out).expect("write samples.rs");
}
