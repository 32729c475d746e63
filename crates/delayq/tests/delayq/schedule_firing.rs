//! How a schedule's ticks fire: a jitter puts each tick's message a little after its tick,
//! by the offset every scheduler reckons the same (`tick_jitter`); `Overlap::Skip` fires no
//! tick while the last tick's message is pending or in flight.

use std::time::Duration;

use delayq::{
    tick_jitter, Firing, MissedTicks, Overlap, Recurrence, Scheduler, SendOptions, State,
};
use tokio::sync::oneshot;

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

fn every_second() -> Recurrence {
    Recurrence::interval(Duration::from_secs(1), 0).expect("interval")
}

fn start_scheduler(
    dq: &delayq::DelayQ,
    q: &delayq::Queue,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let scheduler = Scheduler::new(dq)
        .queues(std::slice::from_ref(q))
        .refresh(Duration::from_millis(50))
        .lead(Duration::from_millis(100));
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(scheduler.run(async move {
        let _ = stopped.await;
    }));
    (stop, task)
}

fn tick_of(id: &str) -> u64 {
    id.rsplit(':')
        .next()
        .and_then(|t| t.parse().ok())
        .expect("a tick id")
}

#[tokio::test]
async fn a_jittered_tick_is_due_at_its_tick_plus_the_offset_every_scheduler_reckons() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "jittered");
    let jitter = Duration::from_millis(500);
    let firing = Firing {
        jitter: Some(jitter),
        overlap: Overlap::Allow,
    };
    q.schedules()
        .put_with(
            "nightly",
            every_second(),
            MissedTicks::Skip,
            firing,
            "x",
            &SendOptions::new(),
        )
        .await
        .expect("put");
    let info = q
        .schedules()
        .get("nightly")
        .await
        .expect("get")
        .expect("exists");
    assert_eq!(info.firing, firing);
    let (stop, task) = start_scheduler(&dq, &q);
    let mut consumer = q.consumer().await.expect("consumer");
    for _ in 0..3 {
        let d = receive_one(&mut consumer, LEASE).await;
        let tick = tick_of(&d.id);
        let offset = tick_jitter("nightly", tick, jitter).as_millis() as u64;
        assert_eq!(d.due_ms, tick + offset, "{}", d.id);
        assert!(now_ms() >= d.due_ms, "{} delivered early", d.id);
        q.ack(&d).await.expect("ack");
    }
    let _ = stop.send(());
    task.await.expect("scheduler");
}

#[tokio::test]
async fn a_schedule_that_skips_overlaps_fires_no_tick_while_the_last_one_runs() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "no-overlap");
    let firing = Firing {
        jitter: None,
        overlap: Overlap::Skip,
    };
    q.schedules()
        .put_with(
            "report",
            every_second(),
            MissedTicks::Skip,
            firing,
            "x",
            &SendOptions::new(),
        )
        .await
        .expect("put");
    let (stop, task) = start_scheduler(&dq, &q);
    let mut consumer = q.consumer().await.expect("consumer");
    let first = receive_one(&mut consumer, LEASE).await;
    // While it runs (held, not acked), ticks pass; none of them may become a message. Only
    // time shows that nothing happened: wait out two and a half periods.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        counts(&q).await,
        [0, 0, 1, 0],
        "no tick fired while the last one ran"
    );
    let info = q.get(&first.id).await.expect("get").expect("known");
    assert_eq!(info.state, State::InFlight);
    q.ack(&first).await.expect("ack");
    let next = receive_one(&mut consumer, LEASE).await;
    assert!(
        tick_of(&next.id) >= tick_of(&first.id) + 3_000,
        "the ticks skipped while it ran are not sent later: {} after {}",
        next.id,
        first.id
    );
    q.ack(&next).await.expect("ack");
    let _ = stop.send(());
    task.await.expect("scheduler");
}

#[tokio::test]
async fn a_jitter_out_of_bounds_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bad-jitter");
    for jitter in [Duration::ZERO, delayq::MAX_JITTER * 2] {
        let firing = Firing {
            jitter: Some(jitter),
            overlap: Overlap::Allow,
        };
        let put = q
            .schedules()
            .put_with(
                "s",
                every_second(),
                MissedTicks::Skip,
                firing,
                "x",
                &SendOptions::new(),
            )
            .await;
        assert!(put.is_err(), "{jitter:?}");
    }
    assert!(
        q.schedules().get("s").await.expect("get").is_none(),
        "nothing written"
    );
}

#[tokio::test]
async fn a_backfill_sends_each_missed_tick_once_beside_a_scheduler() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "backfilled");
    let schedules = q.schedules();
    schedules
        .put(
            "hourly",
            every_second(),
            MissedTicks::Once,
            "x",
            &SendOptions::new(),
        )
        .await
        .expect("put");
    let created = schedules
        .get("hourly")
        .await
        .expect("get")
        .expect("exists")
        .created_ms;
    // No scheduler runs: the ticks of the next 2.5 s are missed.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let now = now_ms();
    let done = schedules
        .backfill("hourly", created, now)
        .await
        .expect("backfill")
        .expect("a schedule");
    assert!(done.sent >= 2, "{done:?}");
    assert_eq!(done.already_sent, 0);
    let again = schedules
        .backfill("hourly", created, now)
        .await
        .expect("backfill")
        .expect("a schedule");
    assert_eq!(
        (again.sent, again.already_sent),
        (0, done.sent),
        "idempotent"
    );

    // A scheduler that starts now fires the latest missed tick (MissedTicks::Once): it was
    // backfilled, so it is not sent twice.
    let (stop, task) = start_scheduler(&dq, &q);
    let mut consumer = q.consumer().await.expect("consumer");
    let mut ticks = std::collections::BTreeMap::new();
    let first_new = now / 1000 * 1000 + 2000;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !ticks.contains_key(&first_new) {
        assert!(tokio::time::Instant::now() < deadline, "ticks: {ticks:?}");
        let got = consumer
            .receive(&receiving(100, LEASE, Duration::from_millis(200)))
            .await
            .expect("receive");
        for d in &got {
            *ticks.entry(tick_of(&d.id)).or_insert(0) += 1;
        }
        if !got.is_empty() {
            q.ack_many(&got).await.expect("ack");
        }
    }
    let _ = stop.send(());
    task.await.expect("scheduler");
    assert!(
        ticks.values().all(|n| *n == 1),
        "a tick sent twice: {ticks:?}"
    );
    assert!(ticks.len() as u32 > done.sent, "{ticks:?}");
}

#[tokio::test]
async fn a_backfill_outside_its_bounds_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "backfill-bounds");
    let schedules = q.schedules();
    assert_eq!(
        schedules.backfill("none", 0, 1).await.expect("backfill"),
        None
    );
    schedules
        .put(
            "s",
            every_second(),
            MissedTicks::Skip,
            "x",
            &SendOptions::new(),
        )
        .await
        .expect("put");
    let now = now_ms();
    assert!(
        schedules.backfill("s", now, now - 1).await.is_err(),
        "reversed"
    );
    assert!(
        schedules.backfill("s", now, now + 60_000).await.is_err(),
        "the future"
    );
    assert!(
        schedules
            .backfill("s", 0, now)
            .await
            .expect("backfill")
            .is_some(),
        "from before it was created: from its creation"
    );
    assert!(counts(&q).await.iter().sum::<u64>() <= 1);
}

#[tokio::test]
async fn a_schedule_put_by_a_delayq_that_kept_no_record_backfills_once_put_again() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "older");
    let schedules = q.schedules();
    let options = SendOptions::new();
    let put = || schedules.put("s", every_second(), MissedTicks::Skip, "x", &options);
    put().await.expect("put");
    // As an older delayq stored it: no record of sent ticks.
    server.cli(&["HDEL", "dq:{older}:schedule:s", "ticks_from"]);
    let now = now_ms();
    let refused = schedules.backfill("s", 0, now).await;
    assert!(
        matches!(refused, Err(delayq::Error::Invalid(_))),
        "{refused:?}"
    );
    put().await.expect("put again");
    assert!(schedules
        .backfill("s", 0, now_ms())
        .await
        .expect("backfill")
        .is_some());
}
