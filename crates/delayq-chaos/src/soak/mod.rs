//! `delayq-chaos soak`: a long run at a steady rate, to show that nothing grows without
//! bound and that timing does not degrade. Not a fault run: nothing is killed.
//!
//! A `redis-server`, `delayq serve`, one library worker process and one HTTP consumer
//! process start and settle; their memory then is the baseline. A producer process sends at
//! a steady rate for the run's length (library batches, HTTP batches and single HTTP sends,
//! delays uniform up to a bound). Every 10 s the controller samples the server's, the
//! worker's and the consumer's RSS, Redis's `used_memory` and the queue's size; the
//! consumers write the lateness of each 10 s of deliveries. After the last send the queue
//! drains, everything idles for a while, and the last sample is compared with the baseline.
//! `soak_plot.py` draws the samples.

pub mod load;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use redis_fixture::{RedisServer, Reply};
use serde_json::{json, Value};

use crate::history::{now_us, Recorder};
use crate::plan::QUEUE;
use crate::processes::{signal, Launcher, Proc, Role};

/// Settings of a soak run.
#[derive(clap::Args, Debug)]
pub struct SoakArgs {
    /// How long the producer sends, in minutes.
    #[arg(long, default_value_t = 30)]
    minutes: u64,
    /// Messages per second.
    #[arg(long, default_value_t = 5000)]
    rate: u64,
    /// Longest delay, in seconds (delays are uniform from 0).
    #[arg(long, default_value_t = 60)]
    max_delay: u64,
    /// Where samples, lateness and logs go (default: a new directory under the temp dir).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The `delayq` server binary (default: beside this one).
    #[arg(long)]
    delayq_bin: Option<PathBuf>,
}

/// How often the controller samples.
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
/// How long everything idles before the baseline and after the drain.
const SETTLE: Duration = Duration::from_secs(30);

/// One sample of the run's resources.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    t: f64,
    server_rss_kb: u64,
    worker_rss_kb: u64,
    consumer_rss_kb: u64,
    redis_used_bytes: u64,
    pending: u64,
    in_flight: u64,
}

/// Runs the soak; returns whether every process stayed up and the queue drained.
pub fn run(args: SoakArgs) -> Result<bool, String> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::temp_dir().join(format!("delayq-soak-{}", now_us())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{dir:?}: {e}"))?;
    let me = std::env::current_exe().map_err(|e| format!("current exe: {e}"))?;
    let delayq_bin = args
        .delayq_bin
        .clone()
        .unwrap_or_else(|| me.with_file_name("delayq"));
    println!(
        "soak: {} msgs/s for {} min, delays up to {} s, samples in {}",
        args.rate,
        args.minutes,
        args.max_delay,
        dir.display()
    );
    let redis = RedisServer::start();
    let mut launcher = Launcher::new(&dir, me, delayq_bin);
    let port = redis_fixture::free_port();
    let server_url = format!("http://127.0.0.1:{port}");
    let mut server = launcher.server(&redis.url(), port)?;
    let spawn = |launcher: &mut Launcher, role: Role, args: Vec<String>| {
        launcher.chaos(role, &args).map_err(|e| e.to_string())
    };
    let mut worker = spawn(
        &mut launcher,
        Role::Worker,
        vec!["soak-work".into(), "--target".into(), redis.url()],
    )?;
    let mut consumer = spawn(
        &mut launcher,
        Role::Consumer,
        vec!["soak-consume".into(), "--target".into(), server_url.clone()],
    )?;
    let samples = Recorder::create(&dir.join("samples.jsonl")).map_err(|e| e.to_string())?;
    let sample = |server: &Proc, worker: &Proc, consumer: &Proc| {
        let s = Sample {
            t: now_us() as f64 / 1e6,
            server_rss_kb: rss_kb(server.pid()),
            worker_rss_kb: rss_kb(worker.pid()),
            consumer_rss_kb: rss_kb(consumer.pid()),
            redis_used_bytes: info_field(&redis, "memory", "used_memory"),
            pending: count(&redis, "ZCARD", "pending"),
            in_flight: count(&redis, "ZCARD", "leases"),
        };
        samples.record(&sample_json(&s));
        s
    };

    std::thread::sleep(SETTLE);
    let baseline = sample(&server, &worker, &consumer);
    let seconds = args.minutes * 60;
    let mut producer = spawn(
        &mut launcher,
        Role::Producer,
        vec![
            "soak-produce".into(),
            "--redis-url".into(),
            redis.url(),
            "--server".into(),
            server_url,
            "--rate".into(),
            args.rate.to_string(),
            "--max-delay-ms".into(),
            (args.max_delay * 1000).to_string(),
            "--seconds".into(),
            seconds.to_string(),
        ],
    )?;
    let mut peak = baseline;
    let mut failure = None;
    let mut next = Instant::now() + SAMPLE_EVERY;
    let drain_limit = Duration::from_secs(seconds + args.max_delay + 120);
    let started = Instant::now();
    loop {
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        next += SAMPLE_EVERY;
        let s = sample(&server, &worker, &consumer);
        peak = max_of(peak, s);
        for (name, p) in [
            ("server", &mut server),
            ("worker", &mut worker),
            ("consumer", &mut consumer),
        ] {
            if let Some(status) = p.exited() {
                failure.get_or_insert(format!("the {name} exited: {status}"));
            }
        }
        let produced = producer.exited();
        if let Some(status) = produced.filter(|s| !s.success()) {
            failure.get_or_insert(format!("the producer failed: {status}"));
        }
        if failure.is_some() {
            break;
        }
        if produced.is_some() && s.pending + s.in_flight == 0 {
            break;
        }
        if started.elapsed() > drain_limit {
            failure = Some(format!("not drained after {drain_limit:?}"));
            break;
        }
    }
    if failure.is_none() {
        std::thread::sleep(SETTLE);
    }
    let last = sample(&server, &worker, &consumer);
    for p in [&worker, &consumer, &server] {
        let _ = signal(p.pid(), "TERM");
    }
    for p in [&mut worker, &mut consumer, &mut server, &mut producer] {
        let _ = p.child.wait();
    }

    let report = report(&dir, &baseline, &peak, &last, args.minutes)?;
    println!("{report}");
    std::fs::write(dir.join("report.txt"), &report).map_err(|e| e.to_string())?;
    if let Some(why) = failure {
        println!("FAILED: {why}");
        return Ok(false);
    }
    Ok(true)
}

fn sample_json(s: &Sample) -> Value {
    json!({
        "t": s.t,
        "server_rss_kb": s.server_rss_kb,
        "worker_rss_kb": s.worker_rss_kb,
        "consumer_rss_kb": s.consumer_rss_kb,
        "redis_used_bytes": s.redis_used_bytes,
        "pending": s.pending,
        "in_flight": s.in_flight,
    })
}

fn max_of(a: Sample, b: Sample) -> Sample {
    Sample {
        t: b.t,
        server_rss_kb: a.server_rss_kb.max(b.server_rss_kb),
        worker_rss_kb: a.worker_rss_kb.max(b.worker_rss_kb),
        consumer_rss_kb: a.consumer_rss_kb.max(b.consumer_rss_kb),
        redis_used_bytes: a.redis_used_bytes.max(b.redis_used_bytes),
        pending: a.pending.max(b.pending),
        in_flight: a.in_flight.max(b.in_flight),
    }
}

/// The memory table (baseline, peak, after the drain) and the lateness of the deliveries
/// over the run, by tenths of the run.
fn report(
    dir: &Path,
    baseline: &Sample,
    peak: &Sample,
    last: &Sample,
    minutes: u64,
) -> Result<String, String> {
    let mb = |kb: u64| format!("{:.1} MB", kb as f64 / 1024.0);
    let mut out = format!(
        "| memory | before the load | peak | after the drain |\n|---|---:|---:|---:|\n\
         | server RSS | {} | {} | {} |\n| worker RSS | {} | {} | {} |\n\
         | HTTP consumer RSS | {} | {} | {} |\n| Redis used_memory | {} | {} | {} |\n\
         | messages pending | {} | {} | {} |\n\n",
        mb(baseline.server_rss_kb),
        mb(peak.server_rss_kb),
        mb(last.server_rss_kb),
        mb(baseline.worker_rss_kb),
        mb(peak.worker_rss_kb),
        mb(last.worker_rss_kb),
        mb(baseline.consumer_rss_kb),
        mb(peak.consumer_rss_kb),
        mb(last.consumer_rss_kb),
        mb(baseline.redis_used_bytes / 1024),
        mb(peak.redis_used_bytes / 1024),
        mb(last.redis_used_bytes / 1024),
        baseline.pending,
        peak.pending,
        last.pending,
    );
    let windows = lateness_windows(dir)?;
    let (Some(first), Some(end)) = (windows.first(), windows.last()) else {
        return Ok(out + "no deliveries recorded\n");
    };
    let (t0, span) = (first.t, (end.t - first.t).max(1.0));
    out += &format!(
        "lateness by tenth of the run ({minutes} min of sends, then the drain): deliveries, \
         and the worst 10 s window's p50 / p99 / max in ms\n\n\
         | tenth | deliveries | p50 | p99 | max |\n|---|---:|---:|---:|---:|\n"
    );
    for tenth in 0..10 {
        let in_tenth: Vec<&Window> = windows
            .iter()
            .filter(|w| (((w.t - t0) / span * 10.0) as usize).min(9) == tenth)
            .collect();
        let worst = |f: fn(&Window) -> f64| in_tenth.iter().map(|w| f(w)).fold(0.0, f64::max);
        out += &format!(
            "| {} | {} | {:.1} | {:.1} | {:.1} |\n",
            tenth + 1,
            in_tenth.iter().map(|w| w.n).sum::<u64>(),
            worst(|w| w.p50),
            worst(|w| w.p99),
            worst(|w| w.max),
        );
    }
    Ok(out)
}

/// One consumer's 10 s of deliveries: when, how many, and how late (ms).
struct Window {
    t: f64,
    n: u64,
    p50: f64,
    p99: f64,
    max: f64,
}

/// Every consumer's lateness windows with deliveries, by time.
fn lateness_windows(dir: &Path) -> Result<Vec<Window>, String> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| e.to_string())? {
        let path = entry.map_err(|e| e.to_string())?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !(name.starts_with("worker-") || name.starts_with("consumer-"))
            || !name.ends_with(".jsonl")
        {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<Value>(line) else {
                continue;
            };
            let n = v["n"].as_u64().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let f = |k: &str| v[k].as_f64().unwrap_or(0.0);
            out.push(Window {
                t: f("t"),
                n,
                p50: f("p50_ms"),
                p99: f("p99_ms"),
                max: f("max_ms"),
            });
        }
    }
    out.sort_by(|a, b| a.t.total_cmp(&b.t));
    Ok(out)
}

/// Resident memory of a process, in kB (0 if it is gone).
fn rss_kb(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status.lines().find_map(|l| {
                l.strip_prefix("VmRSS:")
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// Field `field` of `INFO section` as a number, 0 when Redis does not say.
fn info_field(redis: &RedisServer, section: &str, field: &str) -> u64 {
    redis
        .info_field(section, field)
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn count(redis: &RedisServer, cmd: &str, key: &str) -> u64 {
    let key = format!("dq:{{{QUEUE}}}:{key}");
    match redis.command(&[cmd, &key]) {
        Ok(Reply::Int(n)) => n.max(0) as u64,
        _ => 0,
    }
}
