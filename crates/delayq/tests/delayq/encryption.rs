//! Payloads encrypted at rest ([`Setting::Encryption`]): with it on, Redis (its keys and its
//! append-only file) holds no byte of a payload in clear, whatever path the message took;
//! the newest key seals and every key opens; a client without the key gets a defined
//! outcome (a send refused, a message made a dead letter that says why); and a client that
//! read the setting before it was turned on still sends sealed.

use std::time::Duration;

use delayq::{
    Amend, Config, DelayQ, Error, Keyring, Message, MissedTicks, Next, OnDuplicate, Queue,
    Recurrence, Sealed, SendOptions, Setting, State, Undecryptable,
};
use redis_fixture::{RedisServer, ServerConfig};

use crate::common::*;

/// What every test payload holds: the bytes that must never be found in Redis.
const SECRET: &str = "card-4111-1111-1111-1111";

fn keyring(ids: &[&str]) -> Keyring {
    let lines: Vec<String> = ids
        .iter()
        .map(|id| Keyring::new_key_line(id).expect("a key line"))
        .collect();
    Keyring::parse(&lines.join("\n")).expect("a key file")
}

async fn client(server: &RedisServer, keys: Option<&Keyring>) -> DelayQ {
    let mut config = Config::default();
    if let Some(keys) = keys {
        config = config.keys(keys.clone());
    }
    DelayQ::connect_with(&server.url(), config)
        .await
        .expect("connect")
}

fn secret(n: usize) -> Vec<u8> {
    format!("{{\"order\": {n}, \"pan\": \"{SECRET}\"}}").into_bytes()
}

/// Every value of every key of `server`, read raw by its type (never `DUMP`, which may
/// compress a value), and every file of its directory (the AOF, every write since the
/// server started): the bytes Redis holds.
fn everything_redis_holds(server: &RedisServer) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in server.every_value_read() {
        out.extend(key.into_bytes());
        out.extend(value.into_bytes());
    }
    for entry in walk(server.dir()) {
        out.extend(std::fs::read(entry).unwrap_or_default());
    }
    out
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

fn holds_in_clear(bytes: &[u8]) -> bool {
    bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes())
}

async fn encrypting(dq: &DelayQ, name: &str) -> Queue {
    let q = queue(dq, name);
    q.configure(&[Setting::Encryption(true)])
        .await
        .expect("turn encryption on");
    q
}

#[tokio::test]
async fn redis_holds_no_byte_of_a_payload_in_clear_on_any_path() {
    let server = RedisServer::start_with(ServerConfig::appendonly());
    let keys = keyring(&["k1"]);
    let dq = client(&server, Some(&keys)).await;
    let q = encrypting(&dq, "orders").await;
    q.configure(&[
        Setting::Events(Some(1000)),
        Setting::RetainCompleted(Some(delayq::Retention {
            keep_for: Duration::from_secs(3600),
            max: 100,
        })),
    ])
    .await
    .expect("events and retention");
    // One by one, with an id, a group, a deadline, an upsert; a batch by the path without
    // Lua and one with ids; far ahead (a bucket); a schedule; a dead letter; one in flight.
    q.send(&secret(1), &SendOptions::new()).await.expect("send");
    q.send(
        &secret(2),
        &SendOptions::new().id("o-2").ttl(Duration::from_secs(600)),
    )
    .await
    .expect("send with an id");
    q.send(&secret(3), &SendOptions::new().group("shop-9"))
        .await
        .expect("grouped");
    q.send(
        &secret(4),
        &SendOptions::new()
            .id("o-2")
            .on_duplicate(OnDuplicate::Replace),
    )
    .await
    .expect("upsert");
    let plain_batch: Vec<Message> = (5..8)
        .map(|n| Message::new(secret(n), SendOptions::new()))
        .collect();
    q.send_batch(&plain_batch).await.expect("batch");
    let id_batch: Vec<Message> = (8..10)
        .map(|n| Message::new(secret(n), SendOptions::new().id(format!("b-{n}"))))
        .collect();
    q.send_batch(&id_batch).await.expect("batch with ids");
    q.send(
        &secret(10),
        &SendOptions::new().delay(Duration::from_secs(7 * 24 * 3600)),
    )
    .await
    .expect("far ahead");
    put_hourly(&q, &secret(11)).await;
    let got = drain(&q, 8).await;
    assert_eq!(got.len(), 8, "every message due now");
    for d in &got {
        assert!(
            holds_in_clear(&d.payload),
            "delivered opened: {:?}",
            d.payload
        );
    }
    let (dead, held, acked) = (&got[0], &got[1], &got[2..]);
    q.fail_amended(
        dead,
        "gave up",
        Next::Dead,
        &Amend::default().payload(secret(12)),
    )
    .await
    .expect("a dead letter with a new payload");
    q.ack_many(acked).await.expect("ack");
    let stored = everything_redis_holds(&server);
    assert!(!holds_in_clear(&stored), "a payload in clear in Redis");
    assert!(stored.len() > 1000, "the check read what Redis holds");
    // Each reader is given the payload opened, and told it was sealed.
    let letters = q.dead_letters().list(0, 10).await.expect("dead letters");
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].payload, secret(12));
    assert_eq!(letters[0].sealed, Some(Sealed::Opened { key: "k1".into() }));
    let info = q.get(&held.id).await.expect("get").expect("in flight");
    assert_eq!(
        (info.state, &info.payload),
        (State::InFlight, &held.payload)
    );
    let schedule = q
        .schedules()
        .get("hourly")
        .await
        .expect("get")
        .expect("schedule");
    assert_eq!(schedule.payload, secret(11));
}

#[tokio::test]
async fn a_listing_or_search_neither_shows_nor_searches_a_sealed_payload() {
    let (server, _) = setup().await;
    let dq = client(&server, Some(&keyring(&["k1"]))).await;
    let q = encrypting(&dq, "listed").await;
    q.send(&secret(1), &SendOptions::new().id("needle-in-id"))
        .await
        .expect("send");
    let page = q.list(State::Ready, None, 10).await.expect("list");
    assert_eq!(page.messages.len(), 1);
    let listed = &page.messages[0];
    assert!(listed.payload.is_empty());
    assert_eq!(listed.sealed, Some(Sealed::Listed { key: "k1".into() }));
    let by_payload = q
        .search(State::Ready, SECRET.as_bytes(), None, 100)
        .await
        .expect("search");
    assert!(
        by_payload.messages.is_empty(),
        "a sealed payload is never searched"
    );
    let by_id = q
        .search(State::Ready, b"needle", None, 100)
        .await
        .expect("search");
    assert_eq!(by_id.messages.len(), 1, "its id still is");
}

#[tokio::test]
async fn the_newest_key_seals_an_old_key_still_opens_and_a_missing_key_makes_a_dead_letter() {
    let (server, _) = setup().await;
    let (old, both, new_only) = {
        let one = Keyring::new_key_line("k1").expect("line");
        let two = Keyring::new_key_line("k2").expect("line");
        let parse = |lines: &[&str]| Keyring::parse(&lines.join("\n")).expect("keys");
        (parse(&[&one]), parse(&[&one, &two]), parse(&[&two]))
    };
    let a = client(&server, Some(&old)).await;
    let q = encrypting(&a, "rotating").await;
    q.send(&secret(1), &SendOptions::new().id("before"))
        .await
        .expect("send");
    let rotated = client(&server, Some(&both)).await;
    let q2 = queue(&rotated, "rotating");
    q2.send(&secret(2), &SendOptions::new().id("after"))
        .await
        .expect("send");
    let keys_of = |page: &delayq::Page| -> Vec<(String, Option<String>)> {
        page.messages
            .iter()
            .map(|m| {
                (
                    m.id.clone(),
                    m.sealed.as_ref().and_then(|s| s.key().map(str::to_owned)),
                )
            })
            .collect()
    };
    let mut listed = keys_of(&q2.list(State::Ready, None, 10).await.expect("list"));
    listed.sort();
    assert_eq!(
        listed,
        [
            ("after".to_owned(), Some("k2".to_owned())),
            ("before".to_owned(), Some("k1".to_owned()))
        ]
    );
    // A consumer that holds only the newer key cannot open the older message: it becomes a
    // dead letter that says why, and nothing is lost.
    let partial = client(&server, Some(&new_only)).await;
    let got = drain(&queue(&partial, "rotating"), 2).await;
    assert_eq!(
        payloads(&got),
        [String::from_utf8(secret(2)).expect("text")]
    );
    let letters = q2.dead_letters().list(0, 10).await.expect("dead letters");
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].id, "before");
    assert_eq!(
        letters[0].last_error.as_deref(),
        Some("undecryptable: no key k1")
    );
    assert_eq!(
        letters[0].payload,
        secret(1),
        "opened for a client with every key"
    );
    // Without any key, a reader is told so, and given no payload.
    let keyless = client(&server, None).await;
    let info = queue(&keyless, "rotating")
        .get("before")
        .await
        .expect("get")
        .expect("dead");
    assert!(info.payload.is_empty());
    assert_eq!(
        info.sealed,
        Some(Sealed::Undecryptable(Undecryptable::NoKey("k1".into())))
    );
    // A client with both keys requeues it and it is delivered opened.
    assert!(q2.dead_letters().requeue("before").await.expect("requeue"));
    let got = drain(&q2, 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].payload, secret(1));
}

#[tokio::test]
async fn a_keyless_client_cannot_turn_encryption_on_nor_send_in_clear_to_a_queue_that_encrypts() {
    let (server, _) = setup().await;
    let keyless = client(&server, None).await;
    let q = queue(&keyless, "guarded");
    match q.configure(&[Setting::Encryption(true)]).await {
        Err(Error::NoKey { queue }) => assert_eq!(queue, "guarded"),
        other => panic!("turned on without a key: {other:?}"),
    }
    let keyed = client(&server, Some(&keyring(&["k1"]))).await;
    encrypting(&keyed, "guarded").await;
    let before = server.every_key_dumped("dq:{guarded}*");
    for result in [
        q.send(&secret(1), &SendOptions::new()).await.map(|_| ()),
        q.send_batch(&[Message::new(secret(2), SendOptions::new())])
            .await
            .map(|_| ()),
    ] {
        assert!(matches!(result, Err(Error::NoKey { .. })), "{result:?}");
    }
    assert_eq!(
        server.every_key_dumped("dq:{guarded}*"),
        before,
        "nothing written"
    );
}

#[tokio::test]
async fn encryption_needs_the_queue_in_format_7() {
    let (server, _) = setup().await;
    let (_, _) = queue_of_format(&server, "older", 6).await;
    let keyed = client(&server, Some(&keyring(&["k1"]))).await;
    match queue(&keyed, "older")
        .configure(&[Setting::Encryption(true)])
        .await
    {
        Err(Error::FormatTooOld {
            found: 6,
            needed: 7,
            ..
        }) => {}
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_client_that_read_the_setting_before_it_was_turned_on_sends_sealed() {
    let server = RedisServer::start_with(ServerConfig::appendonly());
    let keys = keyring(&["k1"]);
    let early = client(&server, Some(&keys)).await;
    let q = queue(&early, "turned");
    // This client reads the queue's settings (encryption off) and keeps them for a lease.
    q.send(b"before, in clear", &SendOptions::new())
        .await
        .expect("send");
    encrypting(&client(&server, Some(&keys)).await, "turned").await;
    q.send(&secret(1), &SendOptions::new()).await.expect("one");
    q.send_batch(&[Message::new(secret(2), SendOptions::new())])
        .await
        .expect("a batch by the path without Lua");
    q.send_batch(&[Message::new(secret(3), SendOptions::new().id("x"))])
        .await
        .expect("a batch by the script");
    assert!(!holds_in_clear(&everything_redis_holds(&server)));
    let got = drain(&q, 4).await;
    assert_eq!(got.len(), 4);
}

#[tokio::test]
async fn a_new_payload_for_the_next_attempts_is_sealed_too_by_delivery_or_receipt() {
    let server = RedisServer::start_with(ServerConfig::appendonly());
    let dq = client(&server, Some(&keyring(&["k1"]))).await;
    let q = encrypting(&dq, "amended").await;
    q.send(b"first", &SendOptions::new().id("a"))
        .await
        .expect("send");
    q.send(b"first", &SendOptions::new().id("b"))
        .await
        .expect("send");
    let got = drain(&q, 2).await;
    assert_eq!(got.len(), 2);
    let now = Next::After(Duration::ZERO);
    q.fail_amended(&got[0], "retry", now, &Amend::default().payload(secret(1)))
        .await
        .expect("by delivery");
    let receipt: delayq::Receipt = got[1].receipt().to_string().parse().expect("a receipt");
    q.fail_receipt(&receipt, "retry", now, &Amend::default().payload(secret(2)))
        .await
        .expect("by receipt");
    assert!(!holds_in_clear(&everything_redis_holds(&server)));
    let mut again = payloads(&drain(&q, 2).await);
    again.sort();
    let expected: Vec<String> = [1, 2]
        .map(|n| String::from_utf8(secret(n)).expect("text"))
        .into();
    assert_eq!(again, expected);
}

#[tokio::test]
async fn a_schedule_defined_before_its_queue_encrypts_sends_its_ticks_sealed() {
    let server = RedisServer::start_with(ServerConfig::appendonly());
    let keys = keyring(&["k1"]);
    let dq = client(&server, Some(&keys)).await;
    let q = queue(&dq, "ticking");
    let every_second = Recurrence::interval(Duration::from_secs(1), 0).expect("interval");
    q.schedules()
        .put(
            "each",
            every_second,
            MissedTicks::Skip,
            secret(1),
            &SendOptions::new(),
        )
        .await
        .expect("schedule");
    let q = encrypting(&dq, "ticking").await;
    let scheduler = delayq::Scheduler::new(&dq)
        .queues(std::slice::from_ref(&q))
        .refresh(Duration::from_millis(100));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(scheduler.run(async move {
        let _ = stopped.await;
    }));
    let got = drain(&q, 1).await;
    let _ = stop.send(());
    let _ = running.await;
    assert_eq!(got.len(), 1, "a tick delivered");
    assert_eq!(got[0].payload, secret(1));
    let page = q.list(State::Delayed, None, 10).await.expect("list");
    let ready = q.list(State::Ready, None, 10).await.expect("list");
    for m in page.messages.iter().chain(&ready.messages) {
        assert!(matches!(m.sealed, Some(Sealed::Listed { .. })), "{m:?}");
    }
}

#[tokio::test]
async fn rotate_keys_seals_everything_again_with_the_newest_key_so_the_old_one_can_go() {
    let (server, _) = setup().await;
    let one = Keyring::new_key_line("k1").expect("line");
    let two = Keyring::new_key_line("k2").expect("line");
    let parse = |lines: &[&str]| Keyring::parse(&lines.join("\n")).expect("keys");
    let old = client(&server, Some(&parse(&[&one]))).await;
    let q = encrypting(&old, "rotated").await;
    let week = Duration::from_secs(7 * 24 * 3600);
    q.send(&secret(1), &SendOptions::new().id("held"))
        .await
        .expect("send");
    let held = drain(&q, 1).await;
    assert_eq!(held.len(), 1, "one in flight");
    let sends = [
        SendOptions::new().id("ready"),
        SendOptions::new().id("urgent").priority(9),
        SendOptions::new()
            .id("later")
            .delay(Duration::from_secs(600)),
        SendOptions::new().id("far").delay(week),
        SendOptions::new().group("shop-1"),
        SendOptions::new()
            .group("shop-2")
            .delay(Duration::from_secs(600)),
        SendOptions::new().id("doomed"),
    ];
    for (n, options) in sends.iter().enumerate() {
        q.send(&secret(n + 2), options).await.expect("send");
    }
    let doomed = q.get("doomed").await.expect("get").expect("pending");
    assert_eq!(doomed.state, State::Ready);
    put_hourly(&q, &secret(20)).await;

    let both = client(&server, Some(&parse(&[&one, &two]))).await;
    let q2 = queue(&both, "rotated");
    // A dead letter too: taken and failed for good.
    let mut consumer = q2.consumer().await.expect("consumer");
    let taken = consumer
        .receive(&receiving(10, Duration::from_secs(30), Duration::ZERO))
        .await
        .expect("receive");
    let (dead, back): (Vec<_>, Vec<_>) = taken.into_iter().partition(|d| d.id == "doomed");
    q2.fail(&dead[0], "gave up", Next::Dead)
        .await
        .expect("dead");
    q2.release(&back).await.expect("released");
    let done = q2.rotate_keys().await.expect("rotate");
    assert_eq!(done.key, "k2");
    assert_eq!(done.resealed, 8, "{done:?}");
    assert_eq!(
        (done.changed, done.unopened, done.in_flight),
        (0, 0, 1),
        "{done:?}"
    );
    assert_eq!(
        q2.rotate_keys().await.expect("again").resealed,
        0,
        "nothing left to do"
    );

    // The message in flight throughout is settled; then a client that holds only the new key
    // reads and takes everything else.
    q.ack(&held[0]).await.expect("ack");
    let new_only = client(&server, Some(&parse(&[&two]))).await;
    let q3 = queue(&new_only, "rotated");
    let letters = q3.dead_letters().list(0, 10).await.expect("dead letters");
    assert_eq!(letters.len(), 1);
    assert_eq!(letters[0].sealed, Some(Sealed::Opened { key: "k2".into() }));
    let schedule = q3
        .schedules()
        .get("hourly")
        .await
        .expect("get")
        .expect("schedule");
    assert_eq!(schedule.payload, secret(20));
    for id in ["later", "far"] {
        let info = q3.get(id).await.expect("get").expect("pending");
        assert_eq!(
            info.sealed,
            Some(Sealed::Opened { key: "k2".into() }),
            "{id}"
        );
    }
    let got = drain(&q3, 3).await;
    assert_eq!(got.len(), 3, "ready, urgent and the grouped one, opened");
    assert!(
        q3.dead_letters().list(0, 10).await.expect("dead").len() == 1,
        "none more"
    );
}

#[tokio::test]
async fn rotate_keys_seals_what_was_stored_in_clear_before_the_queue_encrypted() {
    let (server, _) = setup().await;
    let dq = client(&server, Some(&keyring(&["k1"]))).await;
    let q = queue(&dq, "late");
    q.send(&secret(1), &SendOptions::new()).await.expect("send");
    q.send(&secret(2), &SendOptions::new().group("g"))
        .await
        .expect("send");
    q.send(
        &secret(3),
        &SendOptions::new().delay(Duration::from_secs(7 * 24 * 3600)),
    )
    .await
    .expect("far");
    put_hourly(&q, &secret(4)).await;
    assert_eq!(
        q.rotate_keys().await.expect("rotate").resealed,
        0,
        "in clear is fine here"
    );
    assert!(holds_in_clear(&everything_redis_holds(&server)));
    let q = encrypting(&dq, "late").await;
    let done = q.rotate_keys().await.expect("rotate");
    assert_eq!(done.resealed, 4, "{done:?}");
    assert!(!holds_in_clear(&everything_redis_holds(&server)));
    let got = drain(&q, 2).await;
    let mut shown = payloads(&got);
    shown.sort();
    let expected: Vec<String> = [1, 2]
        .map(|n| String::from_utf8(secret(n)).expect("text"))
        .into();
    assert_eq!(shown, expected);
}
