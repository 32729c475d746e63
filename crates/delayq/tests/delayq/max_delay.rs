//! A queue's max delay: sends due further out are refused as bad input with nothing
//! written, whichever way they go to Redis (a script, or the transaction of a batch
//! without ids), and lifting it lets them in.

use std::time::Duration;

use delayq::{Error, InvalidInput, Message, SendOptions, Setting};

use crate::common::*;

const HOUR: Duration = Duration::from_secs(3600);

fn refused_as_schedule(result: delayq::Result<impl std::fmt::Debug>) {
    match result {
        Err(Error::Invalid(InvalidInput::Schedule(why))) => {
            assert!(why.contains("max delay"), "{why}");
        }
        other => panic!("expected a refused schedule, got {other:?}"),
    }
}

#[tokio::test]
async fn a_send_further_out_than_the_max_delay_is_refused_with_nothing_written() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bounded");
    q.configure(&[Setting::MaxDelay(Some(HOUR))])
        .await
        .expect("configure");
    assert_eq!(q.stats().await.expect("stats").max_delay, Some(HOUR));

    let too_far = SendOptions::new().delay(2 * HOUR);
    refused_as_schedule(q.send(b"x", &too_far).await);
    refused_as_schedule(q.send(b"x", &too_far.clone().id("c1")).await);
    let at = now_ms() + 3 * 3_600_000;
    refused_as_schedule(q.send(b"x", &SendOptions::new().deliver_at(at)).await);
    // A batch without ids goes without Lua; one message too far refuses the whole batch.
    let batch = [
        Message::new(b"near".to_vec(), SendOptions::new()),
        Message::new(b"far".to_vec(), too_far.clone()),
    ];
    refused_as_schedule(q.send_batch(&batch).await);
    assert_eq!(counts(&q).await, [0, 0, 0, 0], "nothing was written");

    q.send(b"x", &SendOptions::new().delay(HOUR / 2))
        .await
        .expect("within the limit");
    q.configure(&[Setting::MaxDelay(None)]).await.expect("lift");
    assert_eq!(q.stats().await.expect("stats").max_delay, None);
    q.send_batch(&batch).await.expect("lifted");
    assert_eq!(counts(&q).await, [2, 1, 0, 0]);
}

#[tokio::test]
async fn a_max_delay_of_nothing_or_over_ten_years_is_refused() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "bad");
    for d in [Duration::ZERO, delayq::MAX_DELAY + Duration::from_secs(1)] {
        assert!(q.configure(&[Setting::MaxDelay(Some(d))]).await.is_err());
    }
    assert_eq!(q.stats().await.expect("stats").max_delay, None);
}
