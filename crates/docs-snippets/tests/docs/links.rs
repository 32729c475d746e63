//! Every relative link of the docs book, the front page and the READMEs beside the code
//! points at a file that exists: a page moved or renamed breaks this test, not a reader's
//! click.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The targets of the `[text](target)` links of `text`, without their `#anchor`.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        rest = &rest[at + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = rest[..end]
            .split('#')
            .next()
            .unwrap_or("")
            .trim()
            .to_owned();
        rest = &rest[end..];
        targets.push(target);
    }
    targets
}

#[test]
fn every_relative_link_of_the_docs_points_at_a_file() {
    let root = root();
    let mut pages: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    for other in [
        "README.md",
        "deploy/README.md",
        "clients/typescript/README.md",
        "clients/python/README.md",
    ] {
        pages.push(root.join(other));
    }
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).expect("a page");
        let dir = page.parent().expect("a page's folder");
        for target in link_targets(&text) {
            let external = target.contains("://") || target.starts_with("mailto:");
            if target.is_empty() || external {
                continue;
            }
            checked += 1;
            if !dir.join(&target).exists() {
                broken.push(format!("{}: {target}", page.display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}
