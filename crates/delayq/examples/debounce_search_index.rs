//! Re-index a document after it changes, once per burst of changes: each change sends a
//! message with the document's id, debounced ("run 5 s after the last change, but never
//! more than 30 s after the first"), scaled down here to 500 ms and 3 s.
//!
//! Document 8 changes three times in quick succession: it is re-indexed once, from its
//! last version. Document 7 changes every 100 ms for 5 s: the max wait makes it re-index at
//! 3 s although changes keep coming, and once more after they stop; a change that arrives
//! while a run is in progress sends a second message (the running one is superseded), so
//! no change is missed.
//!
//! Run: `cargo run --example debounce_search_index` (set `DELAYQ_REDIS_URL` to use your
//! Redis).

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use delayq::worker::WorkerBuilder;
use delayq::{DelayQ, Delivery, OnDuplicate, SendOptions};

const QUIET: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(3);

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (url, _server) = support::redis();
    let dq = DelayQ::connect(&url).await?;
    let index = dq.queue("search-index")?;
    let changed = |doc: u32| {
        SendOptions::new()
            .id(format!("reindex-doc-{doc}"))
            .delay(QUIET)
            .on_duplicate(OnDuplicate::Debounce { max_wait: MAX_WAIT })
    };

    let runs: Arc<Mutex<HashMap<String, Vec<String>>>> = Arc::default();
    let seen = runs.clone();
    let started = Instant::now();
    let worker = WorkerBuilder::new(index.clone())
        .concurrency(4)
        .build(move |d: Delivery| {
            let seen = seen.clone();
            async move {
                let version = String::from_utf8_lossy(&d.payload).into_owned();
                println!(
                    "{:>5} ms: re-indexing {} at {version}",
                    started.elapsed().as_millis(),
                    d.id
                );
                let mut runs = seen.lock().map_err(|_| "poisoned")?;
                runs.entry(d.id.clone()).or_default().push(version);
                Ok::<(), &str>(())
            }
        })?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async {
        let _ = stopped.await;
    }));

    for v in 1..=3 {
        index.send(format!("version {v}"), &changed(8)).await?;
    }
    for v in 1..=50 {
        let sent = index.send(format!("version {v}"), &changed(7)).await?;
        if v % 10 == 0 {
            println!(
                "{:>5} ms: doc 7 changed ({v} changes), due {:?}, replaced {:?}",
                started.elapsed().as_millis(),
                sent.due_ms,
                sent.replaced
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Done when nothing is pending or in flight any more.
    loop {
        let stats = index.stats().await?;
        if stats.delayed + stats.ready + stats.in_flight == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = stop.send(());
    running.await??;

    let runs = runs.lock().map_err(|_| "poisoned")?.clone();
    let doc8 = runs.get("reindex-doc-8").cloned().unwrap_or_default();
    let doc7 = runs.get("reindex-doc-7").cloned().unwrap_or_default();
    println!(
        "doc 8: {} run(s) for 3 changes; doc 7: {} run(s) for 50",
        doc8.len(),
        doc7.len()
    );
    if doc8 != ["version 3"] {
        return Err(format!("doc 8 should run once, from version 3: {doc8:?}").into());
    }
    if doc7.len() < 2 || doc7.len() > 4 || doc7.last().map(String::as_str) != Some("version 50") {
        return Err(format!("doc 7 should run a few times, last from version 50: {doc7:?}").into());
    }
    Ok(())
}
