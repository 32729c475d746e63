//! What a claim costs Redis, counted in the commands its script runs (`INFO commandstats`
//! counts those too): a claim reads each set it needs once, whether it finds nothing or the
//! one message due with more to come, so the claims a worker makes per message stay cheap.

use std::collections::BTreeMap;
use std::time::Duration;

use delayq::{Consumer, Delivery, SendOptions};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(30);

/// Calls per command since the last `CONFIG RESETSTAT`, by lower-case name.
fn calls_by_command(server: &RedisServer) -> BTreeMap<String, u64> {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|line| {
            let (name, rest) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.strip_prefix("calls=")?.split(',').next()?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// One receive that makes one claim call, and the commands that call ran. `EXPIRE` is left
/// out: the history's first count of a minute sets its key's expiry, whichever claim that is.
/// A window that caught another call (the process's announcement, renewed in the
/// background) is measured again.
async fn one_claim(server: &RedisServer, consumer: &mut Consumer) -> (Vec<Delivery>, u64) {
    for _ in 0..5 {
        server.cli(&["CONFIG", "RESETSTAT"]);
        let got = consumer
            .receive(&receiving(10, LEASE, Duration::ZERO))
            .await
            .expect("receive");
        let calls = calls_by_command(server);
        let scripts: u64 = ["fcall", "evalsha", "eval"]
            .iter()
            .filter_map(|c| calls.get(*c))
            .sum();
        if scripts == 1 {
            let inside = calls
                .iter()
                .filter(|(name, _)| {
                    !["fcall", "evalsha", "eval", "config|resetstat", "info", "expire"]
                        .contains(&name.as_str())
                })
                .map(|(_, n)| n)
                .sum();
            return (got, inside);
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
