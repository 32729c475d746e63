//! What the calls a message needs cost Redis, counted in the commands their scripts run
//! (`INFO commandstats` counts those too): a send or a claim reads each key it needs once,
//! whether the claim finds nothing or the one message due with more to come.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{Consumer, Delivery, Queue, SendOptions};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// Calls per command since the last `CONFIG RESETSTAT`, by lower-case name.
fn calls_by_command(server: &RedisServer) -> BTreeMap<String, u64> {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse()
                .ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// The commands run inside the one script call made since `CONFIG RESETSTAT`, or `None` when
/// the window caught another call too (the process's announcement, renewed in the
/// background): it is measured again. `EXPIRE` is left out: the history's first count of a
/// minute sets its key's expiry, whichever call that is.
fn inside_one_call(server: &RedisServer) -> Option<u64> {
    let calls = calls_by_command(server);
    let scripts: u64 = ["fcall", "evalsha", "eval"]
        .iter()
        .filter_map(|c| calls.get(*c))
        .sum();
    (scripts == 1).then(|| {
        calls
            .iter()
            .filter(|(name, _)| {
                ![
                    "fcall",
                    "evalsha",
                    "eval",
                    "config|resetstat",
                    "info",
                    "expire",
                ]
                .contains(&name.as_str())
            })
            .map(|(_, n)| n)
            .sum()
    })
}

/// One receive that makes one claim call, and the commands that call ran.
async fn one_claim(server: &RedisServer, consumer: &mut Consumer) -> (Vec<Delivery>, u64) {
    for _ in 0..5 {
        server.cli(&["CONFIG", "RESETSTAT"]);
        let got = consumer
            .receive(&receiving(10, LEASE, Duration::ZERO))
            .await
            .expect("receive");
        if let Some(inside) = inside_one_call(server) {
            return (got, inside);
        }
    }
    panic!("no window held exactly one script call");
}

/// The commands one send ran.
async fn one_send(server: &RedisServer, q: &Queue, options: &SendOptions) -> u64 {
    for _ in 0..5 {
        server.cli(&["CONFIG", "RESETSTAT"]);
        q.send("x", options).await.expect("send");
        if let Some(inside) = inside_one_call(server) {
            return inside;
        }
    }
    panic!("no window held exactly one script call");
}

#[tokio::test]
async fn a_claim_reads_each_set_it_needs_once() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "cost");
    let mut consumer = q.consumer().await.expect("consumer");
    // Warm: the consumer's first calls learn the queue's layout and format.
    let (got, _) = one_claim(&server, &mut consumer).await;
    assert!(got.is_empty());

    // Nothing pending, nothing leased: the clock, the leases' head, the settings, whether
    // buckets exist, the pending set's head.
    let (_, empty) = one_claim(&server, &mut consumer).await;
    assert!(empty <= 5, "an empty claim ran {empty} commands");

    // One message due, three later: besides those five, the message's move (out of
    // pending, into held and leases), the history's two counts and the claim record.
    q.send("now", &SendOptions::new()).await.expect("send");
    for i in 0..3 {
        let later = SendOptions::new().delay(Duration::from_secs(30 + i));
        q.send(format!("later{i}"), &later).await.expect("send");
    }
    let (got, one) = one_claim(&server, &mut consumer).await;
    assert_eq!(payloads(&got), ["now"]);
    assert!(one <= 11, "a claim of one message ran {one} commands");

    // A lease held, nothing due: as cheap as the empty claim.
    let (got, held) = one_claim(&server, &mut consumer).await;
    assert!(got.is_empty());
    assert!(held <= 5, "a claim beside a lease ran {held} commands");
}

#[tokio::test]
async fn a_send_reads_the_queue_settings_once() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "cost");
    q.send("warm", &SendOptions::new()).await.expect("send");
    // The clock, the settings, the sequence number, the pending set's head (does it wake a
    // consumer?), the message, the history's count.
    let delayed = SendOptions::new().delay(Duration::from_secs(30));
    let ran = one_send(&server, &q, &delayed).await;
    assert!(ran <= 6, "a delayed send ran {ran} commands");
    // Due now: and the wake-up of the consumers waiting.
    let ran = one_send(&server, &q, &SendOptions::new()).await;
    assert!(ran <= 7, "an immediate send ran {ran} commands");
}
