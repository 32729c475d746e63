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
