//! Data outlives code: Redis data sets written by earlier releases, checked in, and loaded
//! under today's code, which must find every message, setting and schedule intact and
//! deliver each message once.
//!
//! `data_sets/format1.tsv` was written by `write_the_current_format` (below, run by hand:
//! `cargo test -p delayq --test delayq data_sets::write -- --ignored`) at `c99dcfc`, the
//! last release before data sets carried a format version; `data_sets/format2.tsv` by the
//! same writer once format 2 (the records' extension area) came; `data_sets/format3.tsv`
//! once format 3 (groups) came, with a queue of groups (`data_set_groups.rs`);
//! `data_sets/format4.tsv` (deadlines) by the writer built to read up to format 4
//! (`DELAYQ_NEWEST_FORMAT=4`) at `2ffd1a1`, and `data_sets/format5.tsv` (buckets: the message
//! delayed an hour waits in one) at the same commit; `data_sets/format6.tsv` (a lease per
//! claim: the message in flight is held under its claim's lease; overflow buckets: the
//! message delayed an hour waits in one, `<start>.<part>`, as a burst's last messages do) by
//! the writer of format 6 at a step that bucketed every message by part (the writer of the
//! final format 6 puts that one message in its start's bucket, which format 5's data set
//! covers). Format 7 (payloads encrypted at rest) adds a queue that encrypts, whose data set
//! and tests are `data_set_sealed.rs`'s. A format change adds its
//! own file, written the same way, and its own test; the older files and their tests stay,
//! and each older one is also checked after an upgrade.
//!
//! The file format is `data_set_files.rs`'s.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::common::*;
use crate::data_set_files::{dump, load};
use delayq::{
    DelayQ, MissedTicks, Next, Queue, RateLimit, ReceiveOptions, Recurrence, SendOptions, Setting,
    State,
};

pub(crate) const FORMAT1: &str = include_str!("data_sets/format1.tsv");
const FORMAT2: &str = include_str!("data_sets/format2.tsv");
const FORMAT3: &str = include_str!("data_sets/format3.tsv");
const FORMAT4: &str = include_str!("data_sets/format4.tsv");
pub(crate) const FORMAT5: &str = include_str!("data_sets/format5.tsv");
const FORMAT6: &str = include_str!("data_sets/format6.tsv");

/// Where the writer puts the file it writes (copied into `data_sets/` by hand).
const WRITTEN_TO: &str = concat!(env!("CARGO_TARGET_TMPDIR"), "/data-set-current.tsv");

/// The messages with caller ids that the writer leaves, with their payloads: a delayed one,
/// ready ones of three priorities, one retried with two errors, and one in flight under a
/// lease of two seconds (passed by the time a test loads it).
const PENDING: [(&str, &str); 6] = [
    ("d1", "delayed an hour"),
    ("r1", "ready"),
    ("hi", "priority 9"),
    ("lo", "priority 0"),
    ("e1", "failed twice"),
    ("f1", "in flight"),
];

/// Ready messages without caller ids, sent as one batch.
const GENERATED: [&str; 3] = ["g0", "g1", "g2"];

/// Caller ids of the partitioned queue, three partitions.
const PARTITIONED: [&str; 6] = ["k0", "k1", "k2", "k3", "k4", "k5"];

#[tokio::test]
#[ignore = "writes a data set of the current format; run by hand when a format is added"]
async fn write_the_current_format() {
    let (server, dq) = setup().await;
    let orders = queue(&dq, "orders");
    orders
        .configure(&[Setting::IdempotencyWindow(delayq::MAX_IDEMPOTENCY_WINDOW)])
        .await
        .expect("window");
    let send = |id: &str, options: SendOptions| {
        let orders = orders.clone();
        let (id, payload) = (id.to_owned(), payload_of(id));
        async move {
            orders
                .send(payload.as_bytes(), &options.id(&id))
                .await
                .expect("send");
        }
    };
    send("d1", SendOptions::new().delay(Duration::from_secs(3600))).await;
    send("r1", SendOptions::new()).await;
    send("hi", SendOptions::new().priority(9)).await;
    send("lo", SendOptions::new().priority(0)).await;
    send("e1", SendOptions::new().max_attempts(5)).await;
    send("x1", SendOptions::new().max_attempts(1)).await;
    send("gone1", SendOptions::new()).await;
    let batch: Vec<_> = GENERATED
        .iter()
        .map(|p| delayq::Message::new(p.as_bytes().to_vec(), SendOptions::new()))
        .collect();
    orders.send_batch(&batch).await.expect("batch");

    // e1 fails twice, x1 dies, gone1 is acked: one receive each, by id.
    let mut consumer = orders.consumer().await.expect("consumer");
    for (id, what) in [
        ("e1", "boom 1"),
        ("e1", "boom 2"),
        ("x1", "fatal"),
        ("gone1", ""),
    ] {
        let d = take(&orders, &mut consumer, id, Duration::from_secs(60)).await;
        match what {
            "" => orders.ack(&d).await.expect("ack"),
            error => {
                orders
                    .fail(&d, error, Next::After(Duration::ZERO))
                    .await
                    .expect("fail");
            }
        }
    }
    send("f1", SendOptions::new()).await;
    take(&orders, &mut consumer, "f1", Duration::from_secs(2)).await;

    let paused = queue(&dq, "paused");
    paused
        .send(payload_of("p1").as_bytes(), &SendOptions::new().id("p1"))
        .await
        .expect("send");
    paused.pause().await.expect("pause");
    paused
        .set_rate_limit(Some(RateLimit {
            per_second: 50,
            burst: 10,
        }))
        .await
        .expect("limit");

    let parts = dq.create_queue("parts", 3).await.expect("create");
    for id in PARTITIONED {
        parts
            .send(payload_of(id).as_bytes(), &SendOptions::new().id(id))
            .await
            .expect("send");
    }

    let schedules = orders.schedules();
    schedules
        .put(
            "nightly",
            Recurrence::cron("0 0 3 * * *", "Europe/Berlin").expect("cron"),
            MissedTicks::Once,
            b"report",
            &SendOptions::new().priority(7),
        )
        .await
        .expect("schedule");
    schedules
        .put(
            "minutely",
            Recurrence::interval(Duration::from_secs(60), 0).expect("interval"),
            MissedTicks::Skip,
            b"tick",
            &SendOptions::new(),
        )
        .await
        .expect("schedule");

    crate::data_set_groups::write(&dq).await;

    let text = dump(&dq).await;
    std::fs::write(WRITTEN_TO, text).expect("write the data set");
    println!("data set written to {WRITTEN_TO}");
    drop(server);
}

#[tokio::test]
async fn format1_loads_whole_and_delivers_each_message_once() {
    let (_server, dq) = setup().await;
    load(&dq, FORMAT1).await;
    whole_and_delivered_once(&dq, 1, false).await;
}

#[tokio::test]
async fn format1_upgraded_loses_nothing_and_delivers_each_message_once() {
    upgraded_loses_nothing(FORMAT1).await;
}

#[tokio::test]
async fn format2_upgraded_loses_nothing_and_delivers_each_message_once() {
    upgraded_loses_nothing(FORMAT2).await;
}

/// Loads data set `text` (of an older format), upgrades each queue to the newest format and
/// checks that everything is there and each message is delivered once.
async fn upgraded_loses_nothing(text: &str) {
    let (_server, dq) = setup().await;
    load(&dq, text).await;
    for name in ["orders", "paused", "parts"] {
        let format = queue(&dq, name).upgrade_format().await.expect("upgrade");
        assert!(format.is_current(), "{name}: {format:?}");
    }
    whole_and_delivered_once(&dq, delayq::DATA_FORMAT, false).await;
}

#[tokio::test]
async fn format2_loads_whole_and_delivers_each_message_once() {
    let (_server, dq) = setup().await;
    load(&dq, FORMAT2).await;
    whole_and_delivered_once(&dq, 2, false).await;
}

#[tokio::test]
async fn format3_loads_whole_and_delivers_each_message_once_in_its_groups_order() {
    let (_server, dq) = setup().await;
    load(&dq, FORMAT3).await;
    whole_and_delivered_once(&dq, 3, true).await;
    crate::data_set_groups::check_and_deliver_once(&dq).await;
}

#[tokio::test]
async fn format3_upgraded_loses_nothing_and_delivers_each_message_once_in_its_groups_order() {
    upgraded_with_groups_loses_nothing(FORMAT3).await;
}

/// As [`upgraded_loses_nothing`], for a data set with a queue of groups (format 3 on).
async fn upgraded_with_groups_loses_nothing(text: &str) {
    let (_server, dq) = setup().await;
    load(&dq, text).await;
    for name in dq.queues().await.expect("queues") {
        let format = queue(&dq, name.as_str())
            .upgrade_format()
            .await
            .expect("upgrade");
        assert!(format.is_current(), "{name}: {format:?}");
    }
    whole_and_delivered_once(&dq, delayq::DATA_FORMAT, true).await;
    crate::data_set_groups::check_and_deliver_once(&dq).await;
}

#[tokio::test]
async fn format4_loads_whole_and_delivers_each_message_once_in_its_groups_order() {
    let (_server, dq) = setup().await;
    load(&dq, FORMAT4).await;
    whole_and_delivered_once(&dq, 4, true).await;
    crate::data_set_groups::check_and_deliver_once(&dq).await;
}

#[tokio::test]
async fn format4_upgraded_loses_nothing_and_delivers_each_message_once_in_its_groups_order() {
    upgraded_with_groups_loses_nothing(FORMAT4).await;
}

#[tokio::test]
async fn format5_loads_whole_with_its_bucket_and_delivers_each_message_once() {
    let (_server, dq) = setup().await;
    assert!(
        FORMAT5
            .lines()
            .any(|l| l.starts_with("list\tdq:{orders}:b:")),
        "the data set keeps the message delayed an hour in a bucket"
    );
    load(&dq, FORMAT5).await;
    whole_and_delivered_once(&dq, 5, true).await;
    crate::data_set_groups::check_and_deliver_once(&dq).await;
}

#[tokio::test]
async fn format5_upgraded_loses_nothing_and_delivers_each_message_once_in_its_groups_order() {
    upgraded_with_groups_loses_nothing(FORMAT5).await;
}

#[tokio::test]
async fn format6_loads_whole_with_a_claims_lease_and_a_bucket_part_and_delivers_each_once() {
    let (_server, dq) = setup().await;
    assert!(
        FORMAT6
            .lines()
            .any(|l| l.starts_with("hash\tdq:{orders}:claims\t")),
        "the data set holds its message in flight under its claim's lease"
    );
    assert!(
        FORMAT6
            .lines()
            .any(|l| l.starts_with("list\tdq:{orders}:b:")
                && l.split('\t').nth(1).is_some_and(|k| k.contains('.'))),
        "the data set keeps the message delayed an hour in an overflow bucket (start.part)"
    );
    load(&dq, FORMAT6).await;
    whole_and_delivered_once(&dq, 6, true).await;
    crate::data_set_groups::check_and_deliver_once(&dq).await;
}

#[tokio::test]
async fn format6_upgraded_loses_nothing_and_delivers_each_message_once_in_its_groups_order() {
    upgraded_with_groups_loses_nothing(FORMAT6).await;
}

/// Checks the loaded data set: every message, setting and schedule where the writer left
/// it, each queue's data of `format`, and each message delivered once. `with_groups`: the
/// data set has a queue of groups too (format 3 on), which `data_set_groups.rs` checks.
async fn whole_and_delivered_once(dq: &DelayQ, format: u32, with_groups: bool) {
    let mut names: Vec<String> = dq
        .queues()
        .await
        .expect("queues")
        .iter()
        .map(|q| q.to_string())
        .collect();
    names.sort();
    // From format 3 on, a queue of groups too (data_set_groups.rs).
    let expected = ["orders", "parts", "paused"];
    let expected = if with_groups {
        [&expected[..], &["tenants"]].concat()
    } else {
        expected.to_vec()
    };
    assert_eq!(names, expected);

    for name in &names {
        let found = queue(dq, name).data_format().await.expect("format");
        assert_eq!(found.format(), format, "{name}: {found:?}");
    }

    // Every message is where the writer left it, with its payload, attempts and errors.
    let orders = queue(dq, "orders");
    for (id, payload) in PENDING {
        let m = orders.get(id).await.expect("get").expect(id);
        assert_eq!(m.payload, payload.as_bytes(), "{id}");
        let expected = match id {
            "f1" => vec![State::InFlight],
            _ => vec![State::Delayed, State::Ready],
        };
        assert!(expected.contains(&m.state), "{id}: {:?}", m.state);
    }
    let e1 = orders.get("e1").await.expect("get").expect("e1");
    assert_eq!(e1.attempts, 2);
    let errors: Vec<&str> = e1.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(errors, ["boom 1", "boom 2"]);
    assert_eq!(
        orders.get("hi").await.expect("get").expect("hi").priority,
        9
    );
    let x1 = orders.get("x1").await.expect("get").expect("x1");
    assert_eq!(
        (x1.state, x1.last_error.as_deref()),
        (State::Dead, Some("fatal"))
    );
    assert_eq!(orders.get("gone1").await.expect("get"), None);

    // Settings and schedules.
    let stats = orders.stats().await.expect("stats");
    assert_eq!(stats.idempotency_window, delayq::MAX_IDEMPOTENCY_WINDOW);
    assert_eq!(
        (stats.delayed + stats.ready, stats.in_flight, stats.dead),
        (8, 1, 1)
    );
    let paused = queue(dq, "paused");
    let stats = paused.stats().await.expect("stats");
    assert!(stats.paused);
    assert_eq!(
        stats.rate_limit,
        Some(RateLimit {
            per_second: 50,
            burst: 10
        })
    );
    let parts = queue(dq, "parts");
    assert_eq!(parts.partitions().await.expect("partitions"), 3);
    let mut schedules = orders.schedules().list().await.expect("schedules");
    schedules.sort_by(|a, b| a.name.cmp(&b.name));
    assert_eq!(schedules.len(), 2);
    assert_eq!(schedules[0].name, "minutely");
    assert_eq!(schedules[0].payload, b"tick");
    assert_eq!(schedules[1].name, "nightly");
    assert_eq!(
        schedules[1].recurrence,
        Recurrence::cron("0 0 3 * * *", "Europe/Berlin").expect("cron")
    );
    assert_eq!(
        (schedules[1].missed, schedules[1].priority),
        (MissedTicks::Once, 7)
    );

    // Each message is delivered once: the dead letter after a requeue, the paused queue's
    // after a resume, the one in flight after its lease (long passed) is reclaimed, and the
    // delayed one (due an hour after the data set was written) when moved to now.
    orders.dead_letters().requeue("x1").await.expect("requeue");
    orders
        .reschedule("d1", delayq::Schedule::Now)
        .await
        .expect("reschedule");
    paused.resume().await.expect("resume");
    let mut wanted: HashMap<String, usize> = PENDING
        .iter()
        .map(|(id, _)| id.to_string())
        .chain(["x1".into(), "p1".into()])
        .chain(PARTITIONED.iter().map(|id| id.to_string()))
        .map(|id| (id, 1))
        .collect();
    let mut generated = BTreeMap::new();
    let set =
        delayq::QueueSet::strict([orders.clone(), paused.clone(), parts.clone()]).expect("set");
    let mut consumer = set.consumer().await.expect("consumer");
    let total = wanted.len() + GENERATED.len();
    let mut seen = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while seen < total {
        assert!(
            tokio::time::Instant::now() < deadline,
            "delivered {seen} of {total}; missing {wanted:?}"
        );
        let options = ReceiveOptions {
            max: 100,
            lease: Duration::from_secs(60),
            wait: Duration::from_millis(200),
        };
        for d in consumer.receive(&options).await.expect("receive") {
            seen += 1;
            match wanted.get_mut(&d.id) {
                Some(left) => {
                    assert_eq!(*left, 1, "{} delivered twice", d.id);
                    *left -= 1;
                    assert_eq!(d.payload, payload_of(&d.id).as_bytes(), "{}", d.id);
                }
                None => {
                    let payload = String::from_utf8(d.payload.clone()).expect("text");
                    assert!(GENERATED.contains(&payload.as_str()), "{payload}");
                    assert!(generated.insert(payload, d.id.clone()).is_none());
                }
            }
            let q = match d.queue.as_str() {
                "orders" => &orders,
                "paused" => &paused,
                _ => &parts,
            };
            q.ack(&d).await.expect("ack");
        }
    }
    assert!(wanted.values().all(|left| *left == 0), "{wanted:?}");
    for q in [&orders, &paused, &parts] {
        let s = q.stats().await.expect("stats");
        assert_eq!((s.delayed, s.ready, s.in_flight, s.dead), (0, 0, 0, 0));
    }
}

/// The payload the writer gives caller id `id`.
fn payload_of(id: &str) -> String {
    PENDING
        .iter()
        .find(|(i, _)| *i == id)
        .map_or_else(|| format!("payload of {id}"), |(_, p)| p.to_string())
}

/// Receives what is ready of `queue` under `lease`, keeps message `id` and releases the rest.
async fn take(
    queue: &Queue,
    consumer: &mut delayq::Consumer,
    id: &str,
    lease: Duration,
) -> delayq::Delivery {
    let options = ReceiveOptions {
        max: 100,
        lease,
        wait: Duration::from_secs(5),
    };
    loop {
        let got = consumer.receive(&options).await.expect("receive");
        assert!(!got.is_empty(), "{id} did not come before the wait ran out");
        let (mut wanted, others): (Vec<_>, Vec<_>) = got.into_iter().partition(|d| d.id == id);
        if !others.is_empty() {
            queue.release(&others).await.expect("release");
        }
        if let Some(d) = wanted.pop() {
            return d;
        }
    }
}
