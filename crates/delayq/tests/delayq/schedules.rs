//! Recurring schedules: each tick becomes exactly one message, due at the tick, however many
//! schedulers run; the missed-tick policies after downtime; and the definitions' life cycle.
//! (Tick arithmetic, daylight saving changes included, is tested in `src/recurrence.rs`.)

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{
    DelayQ, InvalidInput, MissedTicks, Queue, Recurrence, Scheduler, SendOptions, MAX_BATCH,
};
use redis_fixture::RedisCluster;
use tokio::sync::oneshot;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// A scheduler of `queues` running in the background until the sender is dropped or fired.
fn start_scheduler(scheduler: Scheduler) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let stopped = async move {
        let _ = stopped.await;
    };
    (stop, tokio::spawn(scheduler.run(stopped)))
}

/// Receives (and acks) the messages of `q`, a batch at a time, until `done` says the ticks
/// seen are enough (after one batch at least), failing the test after `limit`; returns the
/// ticks per schedule, each with how many messages it made.
async fn collect_ticks(
    q: &Queue,
    limit: Duration,
    done: impl Fn(&BTreeMap<String, BTreeMap<u64, u32>>) -> bool,
) -> BTreeMap<String, BTreeMap<u64, u32>> {
    let mut consumer = q.consumer().await.expect("consumer");
    let mut seen: BTreeMap<String, BTreeMap<u64, u32>> = BTreeMap::new();
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "ticks after {limit:?}: {seen:?}"
        );
        let got = consumer
            .receive(&receiving(MAX_BATCH, LEASE, Duration::from_millis(200)))
            .await
            .expect("receive");
        for d in &got {
            let mut parts = d.id.splitn(3, ':');
            let (prefix, name, tick) = (parts.next(), parts.next(), parts.next());
            assert_eq!(prefix, Some("sched"), "not a tick: {}", d.id);
            let tick: u64 = tick.and_then(|t| t.parse().ok()).expect("a tick time");
            // Each message is due at its tick, and is never delivered before it.
            assert_eq!(d.due_ms, tick, "{}", d.id);
            assert!(now_ms() >= tick, "{} delivered early", d.id);
            *seen
                .entry(name.unwrap_or_default().to_owned())
                .or_default()
                .entry(tick)
                .or_default() += 1;
        }
        if !got.is_empty() {
            q.ack_many(&got).await.expect("ack");
        }
        if done(&seen) {
            return seen;
        }
    }
}

/// Ten ticks of an every-second cron schedule with two schedulers running (each with a client
/// of its own): ten messages, one per second, none twice, none missed. One scheduler sends a
/// second ahead, the other (lead 0) at the tick itself, when the tick's message was delivered
/// and acked already: no caller-id lookup could catch that second send.
async fn ten_ticks_with_two_schedulers(q: &Queue, a: &DelayQ, b: &DelayQ) {
    let every_second = Recurrence::cron("* * * * * *", "UTC").expect("cron");
    q.schedules()
        .put(
            "tick",
            every_second,
            MissedTicks::Skip,
            b"{\"job\":\"report\"}",
            &SendOptions::new().kind(delayq::PayloadKind::Json),
        )
        .await
        .expect("put");
    let name = q.name().as_str();
    let mut running = Vec::new();
    for (dq, lead) in [(a, Duration::from_secs(1)), (b, Duration::ZERO)] {
        let scheduler = Scheduler::new(dq)
            .queues(&[dq.queue(name).expect("queue")])
            .refresh(Duration::from_millis(100))
            .lead(lead);
        running.push(start_scheduler(scheduler));
    }
    let seen = collect_ticks(q, Duration::from_secs(30), |s| {
        s.get("tick").is_some_and(|t| t.len() >= 10)
    })
    .await;
    for (stop, task) in running {
        let _ = stop.send(());
        task.await.expect("scheduler task");
    }
    // Whatever the schedulers sent ahead before they stopped comes too.
    wait_until(
        Duration::from_secs(5),
        "the ticks sent ahead to come due",
        || async { q.stats().await.expect("stats").delayed == 0 },
    )
    .await;
    let mut ticks = seen["tick"].clone();
    let rest = collect_ticks(q, Duration::from_secs(5), |_| true).await;
    for (tick, n) in rest.get("tick").into_iter().flatten() {
        *ticks.entry(*tick).or_default() += n;
    }
    assert!(
        ticks.values().all(|n| *n == 1),
        "a tick sent twice: {ticks:?}"
    );
    let times: Vec<u64> = ticks.keys().copied().collect();
    assert!(times.len() >= 10, "{times:?}");
    for pair in times.windows(2) {
        assert_eq!(pair[1] - pair[0], 1000, "a missed tick: {times:?}");
    }
    assert_eq!(times[0] % 1000, 0, "ticks fall on whole seconds");
}

#[tokio::test]
async fn ten_ticks_with_two_schedulers_make_ten_messages() {
    let (server, dq) = setup().await;
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "cron");
    ten_ticks_with_two_schedulers(&q, &dq, &other).await;
}

#[tokio::test]
async fn ten_ticks_with_two_schedulers_on_a_partitioned_queue_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0);
    let dq = cluster_client(&cluster).await;
    let other = cluster_client(&cluster).await;
    let q = dq.create_queue("cron6", 6).await.expect("create");
    ten_ticks_with_two_schedulers(&q, &dq, &other).await;
}

/// Waits until this host's clock (the server's: same host) is half way between two whole
/// seconds, so that no tick of an every-second schedule is near.
async fn half_past_a_second() {
    loop {
        let ms = now_ms() % 1000;
        if (450..550).contains(&ms) {
            return;
        }
        tokio::time::sleep(Duration::from_millis((1500 - ms) % 1000)).await;
    }
}

#[tokio::test]
async fn each_missed_tick_policy_after_a_downtime() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "missed");
    let every = Recurrence::interval(Duration::from_secs(1), 0).expect("interval");
    let policies = [
        ("skip", MissedTicks::Skip),
        ("once", MissedTicks::Once),
        ("all2", MissedTicks::All { max: 2 }),
    ];
    for (name, policy) in policies {
        q.schedules()
            .put(name, every.clone(), policy, name, &SendOptions::new())
            .await
            .expect("put");
    }
    // Short lead and grace: a tick more than 100 ms late counts as missed.
    let scheduler = || {
        Scheduler::new(&dq)
            .queues(std::slice::from_ref(&q))
            .refresh(Duration::from_millis(50))
            .lead(Duration::from_millis(100))
            .grace(Duration::from_millis(100))
    };
    // Up: every schedule fires.
    let (stop, task) = start_scheduler(scheduler());
    collect_ticks(&q, Duration::from_secs(10), |s| s.len() == 3).await;
    let _ = stop.send(());
    task.await.expect("scheduler");
    let mut last = BTreeMap::new();
    for (name, _) in policies {
        let info = q.schedules().get(name).await.expect("get").expect("exists");
        last.insert(name, info.last_tick_ms.expect("fired"));
    }
    // Down for at least three ticks, then up again half way between two ticks: every tick
    // since the last one fired is more than 100 ms late.
    let latest = *last.values().max().expect("three");
    while now_ms() < latest + 3_500 {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    half_past_a_second().await;
    let restart = now_ms();
    let (stop, task) = start_scheduler(scheduler());
    let next = restart / 1000 * 1000 + 1000;
    let seen = collect_ticks(&q, Duration::from_secs(10), |s| {
        policies
            .iter()
            .all(|(name, _)| s.get(*name).is_some_and(|t| t.contains_key(&next)))
    })
    .await;
    let _ = stop.send(());
    task.await.expect("scheduler");
    let missed_latest = restart / 1000 * 1000;
    let fired_missed = |name: &str| -> Vec<u64> {
        seen[name]
            .keys()
            .copied()
            .filter(|t| *t > last[name] && *t <= restart)
            .collect()
    };
    assert_eq!(fired_missed("skip"), Vec::<u64>::new(), "{seen:?}");
    assert_eq!(fired_missed("once"), [missed_latest], "{seen:?}");
    assert_eq!(
        fired_missed("all2"),
        [missed_latest - 1000, missed_latest],
        "{seen:?}"
    );
    for (name, _) in policies {
        assert!(seen[name].values().all(|n| *n == 1), "{seen:?}");
    }
}

#[tokio::test]
async fn schedules_are_created_listed_changed_and_deleted() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "crud");
    let schedules = q.schedules();
    let berlin = Recurrence::cron("0 0 9 * * *", "Europe/Berlin").expect("cron");
    schedules
        .put(
            "morning",
            berlin.clone(),
            MissedTicks::Once,
            "wake up",
            &SendOptions::new().priority(8).max_attempts(3),
        )
        .await
        .expect("put");
    let hourly = Recurrence::interval(Duration::from_secs(3600), 0).expect("interval");
    schedules
        .put(
            "hourly",
            hourly.clone(),
            MissedTicks::Skip,
            "x",
            &SendOptions::new(),
        )
        .await
        .expect("put");
    let list = schedules.list().await.expect("list");
    let names: Vec<&str> = list.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["hourly", "morning"]);
    let morning = &list[1];
    assert_eq!(morning.recurrence, berlin);
    assert_eq!(
        morning.recurrence.as_cron(),
        Some(("0 0 9 * * *", "Europe/Berlin"))
    );
    assert_eq!(
        (
            morning.missed,
            morning.payload.as_slice(),
            morning.priority,
            morning.max_attempts
        ),
        (MissedTicks::Once, b"wake up".as_slice(), 8, 3)
    );
    assert_eq!(morning.last_tick_ms, None);
    // Five next runs, a day apart give or take a daylight saving change, 9:00 in Berlin
    // (07:00 or 08:00 UTC).
    let next = &morning.next_ticks_ms;
    assert_eq!(next.len(), 5);
    assert!(next[0] > now_ms());
    for pair in next.windows(2) {
        let gap = pair[1] - pair[0];
        assert!((23 * 3_600_000..=25 * 3_600_000).contains(&gap), "{next:?}");
    }
    for t in next {
        let hour_utc = t / 3_600_000 % 24;
        assert!(
            t % 3_600_000 == 0 && (hour_utc == 7 || hour_utc == 8),
            "{next:?}"
        );
    }
    let hourly_info = &list[0];
    assert!(hourly_info.next_ticks_ms.iter().all(|t| t % 3_600_000 == 0));

    // Changing one keeps its name; deleting removes it.
    schedules
        .put(
            "hourly",
            hourly,
            MissedTicks::All { max: 3 },
            "y",
            &SendOptions::new(),
        )
        .await
        .expect("put again");
    let changed = schedules.get("hourly").await.expect("get").expect("exists");
    assert_eq!(
        (changed.missed, changed.payload.as_slice()),
        (MissedTicks::All { max: 3 }, b"y".as_slice())
    );
    assert!(schedules.delete("hourly").await.expect("delete"));
    assert!(!schedules.delete("hourly").await.expect("delete again"));
    assert!(schedules.get("hourly").await.expect("get").is_none());
    assert_eq!(schedules.list().await.expect("list").len(), 1);
}

#[tokio::test]
async fn a_deleted_schedule_takes_its_tick_sent_ahead_with_it() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "gone");
    let minutely = Recurrence::interval(Duration::from_secs(60), 0).expect("interval");
    q.schedules()
        .put("m", minutely, MissedTicks::Skip, "x", &SendOptions::new())
        .await
        .expect("put");
    // A lead of two minutes sends the next two ticks at once.
    let scheduler = Scheduler::new(&dq)
        .queues(std::slice::from_ref(&q))
        .lead(Duration::from_secs(120));
    let (stop, task) = start_scheduler(scheduler);
    wait_until(Duration::from_secs(10), "ticks sent ahead", || async {
        q.stats().await.expect("stats").delayed == 2
    })
    .await;
    let _ = stop.send(());
    task.await.expect("scheduler");
    let next = q.schedules().get("m").await.expect("get").expect("exists");
    let last = next.last_tick_ms.expect("sent");
    assert!(q
        .get(&delayq::tick_id("m", last))
        .await
        .expect("get")
        .is_some());
    assert!(q.schedules().delete("m").await.expect("delete"));
    assert!(is_empty(&q).await, "{:?}", q.stats().await);
}

#[tokio::test]
async fn bad_schedules_are_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bad");
    let s = q.schedules();
    let every = Recurrence::interval(Duration::from_secs(5), 0).expect("interval");
    let invalid = |e: delayq::Error| matches!(e, delayq::Error::Invalid(_));
    for name in ["", "a:b", "with space", &"x".repeat(65)] {
        let e = s
            .put(
                name,
                every.clone(),
                MissedTicks::Skip,
                "x",
                &SendOptions::new(),
            )
            .await
            .expect_err("bad name accepted");
        assert!(invalid(e), "{name:?}");
    }
    for options in [
        SendOptions::new().id("mine"),
        SendOptions::new().delay(Duration::from_secs(1)),
        SendOptions::new().priority(10),
    ] {
        let e = s
            .put("ok", every.clone(), MissedTicks::Skip, "x", &options)
            .await
            .expect_err("bad options accepted");
        assert!(invalid(e), "{options:?}");
    }
    let e = s
        .put(
            "ok",
            every.clone(),
            MissedTicks::All { max: 0 },
            "x",
            &SendOptions::new(),
        )
        .await
        .expect_err("all:0 accepted");
    assert!(invalid(e));
    // A crontab line of 5 fields is taken (issue 50, item 10); one of 4 is not.
    assert!(Recurrence::cron("0 9 * * *", "UTC").is_ok());
    assert!(matches!(
        Recurrence::cron("0 9 * *", "UTC"),
        Err(InvalidInput::Schedule(m)) if m.contains("invalid cron expression")
    ));
    assert!(Recurrence::cron("0 0 9 * * *", "Mars/Olympus").is_err());
    assert!(s.list().await.expect("list").is_empty());
}

/// A deleted schedule never fires again, even from a scheduler that still holds its
/// definition: schedulers reload definitions only every `refresh`, and the delete must not
/// depend on them having done so.
#[tokio::test]
async fn a_deleted_schedule_never_fires_again_from_a_scheduler_that_has_not_reloaded() {
    let (server, dq) = setup().await;
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    let q = queue(&dq, "deleted");
    let every = Recurrence::interval(Duration::from_secs(1), 0).expect("interval");
    q.schedules()
        .put("t", every, MissedTicks::Skip, b"x", &SendOptions::new())
        .await
        .expect("put");
    // Reloads once a minute: it will not see the delete while the test runs.
    let stale = Scheduler::new(&other)
        .queues(&[other.queue("deleted").expect("queue")])
        .refresh(Duration::from_secs(60))
        .lead(Duration::ZERO);
    let (stop, task) = start_scheduler(stale);
    collect_ticks(&q, Duration::from_secs(10), |s| {
        s.get("t").is_some_and(|t| !t.is_empty())
    })
    .await;
    assert!(q.schedules().delete("t").await.expect("delete"));
    let deleted_at = now_ms();
    // Three periods: the stale scheduler has tried three more ticks by then.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = collect_ticks(&q, Duration::from_secs(5), |_| true).await;
    let late: Vec<u64> = after
        .get("t")
        .into_iter()
        .flat_map(|t| t.keys().copied())
        .filter(|tick| *tick > deleted_at)
        .collect();
    assert!(
        late.is_empty(),
        "ticks after the delete at {deleted_at}: {late:?}"
    );
    let _ = stop.send(());
    task.await.expect("scheduler task");
    // The name can be used again, and fires.
    let every = Recurrence::interval(Duration::from_secs(1), 0).expect("interval");
    q.schedules()
        .put("t", every, MissedTicks::Skip, b"y", &SendOptions::new())
        .await
        .expect("put again");
    let fresh = Scheduler::new(&dq)
        .queues(std::slice::from_ref(&q))
        .refresh(Duration::from_millis(50))
        .lead(Duration::ZERO);
    let (stop, task) = start_scheduler(fresh);
    let again = collect_ticks(&q, Duration::from_secs(10), |s| {
        s.get("t")
            .is_some_and(|t| t.keys().any(|tick| *tick > deleted_at + 3000))
    })
    .await;
    assert!(!again.is_empty());
    let _ = stop.send(());
    task.await.expect("scheduler task");
}

#[tokio::test]
async fn a_paused_schedule_fires_nothing_until_resumed_then_its_missed_policy_applies() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "paused");
    let every = Recurrence::interval(Duration::from_secs(1), 0).expect("interval");
    let schedules = q.schedules();
    for (name, policy) in [("held", MissedTicks::Once), ("live", MissedTicks::Skip)] {
        schedules
            .put(name, every.clone(), policy, name, &SendOptions::new())
            .await
            .expect("put");
    }
    assert!(schedules.pause("held").await.expect("pause"));
    assert!(
        !schedules.pause("none").await.expect("pause"),
        "no such schedule"
    );
    // Put again, it stays paused.
    schedules
        .put(
            "held",
            every.clone(),
            MissedTicks::Once,
            "held",
            &SendOptions::new(),
        )
        .await
        .expect("put again");
    assert!(
        schedules
            .get("held")
            .await
            .expect("get")
            .expect("exists")
            .paused
    );

    let (stop, task) = start_scheduler(
        Scheduler::new(&dq)
            .queues(std::slice::from_ref(&q))
            .refresh(Duration::from_millis(50))
            .lead(Duration::from_millis(100))
            .grace(Duration::from_millis(100)),
    );
    let seen = collect_ticks(&q, Duration::from_secs(10), |s| {
        s.get("live").is_some_and(|t| t.len() >= 3)
    })
    .await;
    assert!(!seen.contains_key("held"), "fired while paused: {seen:?}");

    half_past_a_second().await;
    let resumed = now_ms();
    assert!(schedules.resume("held").await.expect("resume"));
    assert!(
        !schedules
            .get("held")
            .await
            .expect("get")
            .expect("exists")
            .paused
    );
    let seen = collect_ticks(&q, Duration::from_secs(10), |s| {
        s.get("held")
            .is_some_and(|t| t.keys().any(|tick| *tick > resumed))
    })
    .await;
    let _ = stop.send(());
    task.await.expect("scheduler");
    // Of the ticks it skipped, its policy (once) fires the latest only.
    let caught_up: Vec<u64> = seen["held"]
        .keys()
        .copied()
        .filter(|t| *t <= resumed)
        .collect();
    assert_eq!(caught_up, [resumed / 1000 * 1000], "{seen:?}");
}
