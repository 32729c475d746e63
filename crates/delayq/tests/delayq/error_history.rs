//! A message's error history: its last five failures, oldest first, each with its attempt
//! and time; the newest keeps 4 KiB of its text (a client's error with its stack), the older
//! ones their first 512 bytes; a message that ends leaves none behind.

use std::time::Duration;

use delayq::SendOptions;

use crate::common::*;
use crate::dead_letters::{fail_until_dead, fresh_queue};

const LEASE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_message_keeps_its_last_five_errors_bounded_in_size() {
    let (server, q) = fresh_queue().await;
    q.send(b"x", &SendOptions::new().id("m").max_attempts(7))
        .await
        .expect("send");
    let long = "x".repeat(2000);
    let errors = ["e1", "e2", "e3", "e4", "e5", long.as_str(), "e7"];
    let mut consumer = q.consumer().await.expect("consumer");
    let started = now_ms();
    fail_until_dead(&q, &mut consumer, &errors).await;

    let info = q.get("m").await.expect("get").expect("dead letter");
    let attempts: Vec<u32> = info.errors.iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, [3, 4, 5, 6, 7], "the last five, oldest first");
    let texts: Vec<&str> = info.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(texts, ["e3", "e4", "e5", &long[..512], "e7"]);
    assert!(info.errors.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
    assert!(info
        .errors
        .iter()
        .all(|e| (started..=now_ms()).contains(&e.at_ms)));
    assert_eq!(info.last_error.as_deref(), Some("e7"));
    let listed = q.dead_letters().list(0, 10).await.expect("list");
    assert_eq!(listed[0].errors, info.errors);

    // Requeued and acked, the message leaves no history behind.
    q.dead_letters().requeue("m").await.expect("requeue");
    let d = receive_one(&mut consumer, LEASE).await;
    q.ack(&d).await.expect("ack");
    assert_eq!(q.get("m").await.expect("get"), None);
    assert_eq!(server.cli(&["HLEN", "dq:{retries}:errors"]), "0");
}

/// A failure's text with its stack (clients send `Type: message` and the stack, cut to
/// 4 KiB): the newest error of a message keeps 4 KiB of it, the older ones of its history
/// their first 512 bytes, so a message's history stays within about 6 KiB.
#[tokio::test]
async fn the_newest_error_keeps_its_stack_and_older_ones_are_cut() {
    let (_server, q) = fresh_queue().await;
    q.send(b"x", &SendOptions::new().id("m").max_attempts(3))
        .await
        .expect("send");
    let stack = |n: usize| {
        let mut text = format!("TypeError: attempt {n} failed\n");
        while text.len() < 6000 {
            text.push_str(&format!("    at handler (orders.js:{}:7)\n", text.len()));
        }
        text
    };
    let errors = [stack(1), stack(2), stack(3)];
    let refs: Vec<&str> = errors.iter().map(String::as_str).collect();
    let mut consumer = q.consumer().await.expect("consumer");
    fail_until_dead(&q, &mut consumer, &refs).await;

    let info = q.get("m").await.expect("get").expect("dead letter");
    let lengths: Vec<usize> = info.errors.iter().map(|e| e.error.len()).collect();
    assert_eq!(
        lengths,
        [512, 512, 4096],
        "older ones cut, the newest whole to 4 KiB"
    );
    assert_eq!(info.errors[2].error, errors[2][..4096]);
    assert_eq!(info.errors[0].error, errors[0][..512]);
    assert_eq!(info.last_error.as_deref(), Some(&errors[2][..4096]));
}

/// Data outlives code: a history written by the delayq before the 4 KiB error (the data set
/// of format 5, whose `e1` failed twice) reads as it was, and a failure added to it now keeps
/// the old entries and the new one whole up to 4 KiB.
#[tokio::test]
async fn a_history_written_before_the_4_kib_error_takes_a_new_one() {
    let (_server, dq) = setup().await;
    crate::data_set_files::load(&dq, crate::data_sets::FORMAT5).await;
    let orders = queue(&dq, "orders");
    let mut consumer = orders.consumer().await.expect("consumer");
    let opts = delayq::ReceiveOptions {
        max: 100,
        lease: LEASE,
        wait: Duration::ZERO,
    };
    let got = consumer.receive(&opts).await.expect("receive");
    let e1 = got.iter().find(|d| d.id == "e1").expect("e1 is ready");
    let stack = format!(
        "TypeError: third\n{}",
        "    at handler (x.js:1:1)\n".repeat(200)
    );
    orders
        .nack(e1, &stack, Some(Duration::from_secs(3600)))
        .await
        .expect("nack");

    let info = orders.get("e1").await.expect("get").expect("e1");
    let texts: Vec<&str> = info.errors.iter().map(|e| e.error.as_str()).collect();
    assert_eq!(texts, ["boom 1", "boom 2", &stack[..4096]]);
    let attempts: Vec<u32> = info.errors.iter().map(|e| e.attempt).collect();
    assert_eq!(attempts, [1, 2, 3]);
}
