//! The worker runtime stopping and riding out Redis: shutdown acks what finished and hands
//! back what it cannot finish, and a Redis restart or an AOF load is ridden out.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::worker::{StopReason, WorkerBuilder};
use delayq::{Delivery, Message, SendOptions, State};
use tokio::sync::{mpsc, Notify};
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::util::SubscriberInitExt;

use crate::common::*;

use crate::worker_helpers::*;

#[tokio::test]
async fn shutdown_acks_finished_handlers_and_releases_unfinished_at_once() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "shutdown");
    let quick = q
        .send(b"quick", &SendOptions::new().id("quick"))
        .await
        .expect("send");
    let stuck = q
        .send(b"stuck", &SendOptions::new().id("stuck"))
        .await
        .expect("send");
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let finish_quick = Arc::new(Notify::new());
    let stuck_cancelled = Arc::new(AtomicBool::new(false));
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(2)
        .lease(Duration::from_secs(60))
        .shutdown_grace(Duration::from_secs(1))
        .build({
            let (finish_quick, stuck_cancelled) = (finish_quick.clone(), stuck_cancelled.clone());
            move |d: Delivery| {
                let started = started_tx.clone();
                let (finish_quick, stuck_cancelled) =
                    (finish_quick.clone(), stuck_cancelled.clone());
                async move {
                    let _ = started.send(d.id.clone());
                    if d.payload == b"quick" {
                        finish_quick.notified().await;
                    } else {
                        let _flag = DropFlag(stuck_cancelled);
                        std::future::pending::<()>().await;
                    }
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let mut running = spawn_worker(worker);
    let mut ids = Vec::new();
    for _ in 0..2 {
        let id = tokio::time::timeout(Duration::from_secs(10), started.recv())
            .await
            .expect("both handlers start")
            .expect("handler channel open");
        ids.push(id);
    }
    ids.sort();
    assert_eq!(ids, ["quick", "stuck"]);

    running.stop();
    finish_quick.notify_one();
    assert_eq!(
        running.join().await,
        StopReason::GracefulShutdown { released: 1 }
    );

    assert!(
        q.get(&quick.id).await.expect("get").is_none(),
        "quick acked"
    );
    assert!(
        stuck_cancelled.load(Ordering::SeqCst),
        "stuck handler cancelled"
    );
    let info = q.get(&stuck.id).await.expect("get").expect("stuck kept");
    assert_eq!(
        info.state,
        State::Ready,
        "handed back at once, not after the 60 s lease"
    );
    assert_eq!(info.attempts, 0, "the unfinished attempt is not counted");
    let mut consumer = q.consumer().await.expect("consumer");
    let options = delayq::ReceiveOptions {
        wait: Duration::ZERO,
        ..Default::default()
    };
    let again = consumer.receive(&options).await.expect("receive");
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id.as_str(), again[0].attempt), ("stuck", 1));
    q.ack(&again[0]).await.expect("ack");
    assert!(is_empty(&q).await);
}

/// Log lines written by the subscriber a test installs for itself.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("log lock").extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
    }
}

// A current-thread runtime: every task runs on this thread, so the thread-local subscriber
// below sees the worker's logs.
#[tokio::test]
async fn worker_rides_out_a_redis_restart() {
    let logs = Logs::default();
    let _logging = tracing_subscriber::fmt()
        .with_writer({
            let logs = logs.clone();
            move || logs.clone()
        })
        .with_ansi(false)
        .with_max_level(LevelFilter::WARN)
        .finish()
        .set_default();
    let (mut server, dq) = setup_with(ServerConfig::appendonly()).await;
    let q = queue(&dq, "outage");
    let (started, done) = (Seen::default(), Seen::default());
    let release_held = Arc::new(Notify::new());
    let worker = WorkerBuilder::new(q.clone())
        .concurrency(4)
        .lease(Duration::from_secs(10))
        .build({
            let (started, done, release_held) =
                (started.clone(), done.clone(), release_held.clone());
            move |d: Delivery| {
                let (started, done, release_held) =
                    (started.clone(), done.clone(), release_held.clone());
                async move {
                    started.insert(&d.id);
                    if d.id == "held" {
                        release_held.notified().await;
                    }
                    done.insert(&d.id);
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);

    // Explicit ids make a retried send harmless: a repeat is reported as a duplicate.
    let batch = |names: Vec<String>, delay: Duration| -> Vec<Message> {
        names
            .into_iter()
            .map(|id| Message::new(id.clone(), SendOptions::new().id(id).delay(delay)))
            .collect()
    };
    let named = |prefix: &str| (0..5).map(|i| format!("{prefix}-{i}")).collect::<Vec<_>>();
    let held = vec!["held".to_owned()];
    let (early, late, after) = (named("early"), named("late"), named("after"));
    q.send_batch(&batch(held.clone(), Duration::ZERO))
        .await
        .expect("send held");
    q.send_batch(&batch(early.clone(), Duration::ZERO))
        .await
        .expect("send early");
    q.send_batch(&batch(late.clone(), Duration::from_millis(500)))
        .await
        .expect("send late");
    wait_until(
        Duration::from_secs(10),
        "early messages handled",
        || async { done.contains_all(&early) && started.contains_all(&held) },
    )
    .await;

    server.kill();
    wait_until(
        Duration::from_secs(10),
        "the worker to log the outage",
        || async { logs.text().contains("WARN") },
    )
    .await;
    server.restart();

    let after_batch = batch(after.clone(), Duration::ZERO);
    wait_until(
        Duration::from_secs(10),
        "a send after the restart",
        || async { q.send_batch(&after_batch).await.is_ok() },
    )
    .await;
    release_held.notify_one();
    let everything: Vec<String> = [held, early, late, after].concat();
    wait_until(
        Duration::from_secs(15),
        "every message handled and acked",
        || async {
            done.contains_all(&everything) && q.stats().await.is_ok_and(|s| is_empty_stats(&s))
        },
    )
    .await;
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 0 }
    );
    for id in &everything {
        assert!(q.get(id).await.expect("get").is_none(), "{id} acked");
    }
    println!("worker logs during the outage:\n{}", logs.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acks_are_retried_while_redis_loads_its_aof() {
    let mut config = ServerConfig::appendonly();
    // A plain-command AOF loads slowly enough to be caught loading.
    config.extra_args = [
        "--aof-use-rdb-preamble",
        "no",
        "--enable-debug-command",
        "yes",
    ]
    .map(String::from)
    .to_vec();
    let (mut server, dq) = setup_with(config).await;
    server.cli(&["DEBUG", "POPULATE", "1500000", "filler", "16"]);
    server.cli(&["BGREWRITEAOF"]);
    wait_until(Duration::from_secs(60), "the AOF rewrite", || async {
        let info = server.cli(&["INFO", "persistence"]);
        info.contains("aof_rewrite_in_progress:0") && info.contains("aof_rewrite_scheduled:0")
    })
    .await;

    let q = queue(&dq, "loading");
    let attempts = Attempts::default();
    let finish = Arc::new(Notify::new());
    let lease = Duration::from_secs(30);
    let worker = WorkerBuilder::new(q.clone())
        .lease(lease)
        .build({
            let (attempts, finish) = (attempts.clone(), finish.clone());
            move |d: Delivery| {
                let (attempts, finish) = (attempts.clone(), finish.clone());
                async move {
                    attempts.push(d.attempt);
                    finish.notified().await;
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    wait_until(Duration::from_secs(5), "the handler to start", || async {
        !attempts.get().is_empty()
    })
    .await;

    server.restart_loading();
    assert!(
        server.is_loading(),
        "Redis is loading when the handler finishes"
    );
    finish.notify_one();
    let loading = q.stats().await;
    if let Err(e) = &loading {
        assert!(e.is_retryable(), "{e} is worth retrying");
    }
    wait_until(
        Duration::from_secs(20),
        "the ack to land after loading, well within the 30 s lease",
        || async { matches!(q.get(&sent.id).await, Ok(None)) },
    )
    .await;
    assert_eq!(attempts.get(), [1], "handled once");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_finishing_after_shutdown_took_its_message_is_not_also_acked() {
    let logs = global_logs();
    let (_server, dq) = setup().await;
    let q = queue(&dq, "shutdown-race");
    let started = Arc::new(Notify::new());
    let worker = WorkerBuilder::new(q.clone())
        .shutdown_grace(Duration::from_millis(200))
        .build({
            let started = started.clone();
            move |_d: Delivery| {
                let started = started.clone();
                async move {
                    started.notify_one();
                    // Blocks its thread past the grace period, so the abort that shutdown
                    // sends cannot take effect before the handler has finished.
                    std::thread::sleep(Duration::from_millis(800));
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let sent = q.send(b"x", &SendOptions::new()).await.expect("send");
    let running = spawn_worker(worker);
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the handler starts");
    assert_eq!(
        running.shutdown().await,
        StopReason::GracefulShutdown { released: 1 }
    );
    let info = q.get(&sent.id).await.expect("get").expect("handed back");
    assert_eq!((info.state, info.attempts), (State::Ready, 0));
    let unsettled: Vec<String> = logs
        .for_queue("shutdown-race")
        .into_iter()
        .filter(|l| l.contains("could not settle"))
        .collect();
    assert!(
        unsettled.is_empty(),
        "released and then acked as well: {unsettled:?}"
    );
}
