//! Trace context across the queue: a `traceparent` given at send comes back with every
//! delivery of the message (its retries too, and with a worker's handler), none without
//! one, and a malformed one is refused with nothing written.

use std::time::Duration;

use delayq::{Message, SendOptions};

use crate::common::*;

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[tokio::test]
async fn a_traceparent_sent_comes_back_with_each_delivery() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "traced");
    q.send(b"x", &SendOptions::new().id("t1").traceparent(TRACE))
        .await
        .expect("send");
    q.send(b"y", &SendOptions::new().id("t2"))
        .await
        .expect("send");
    let info = |id: &'static str| {
        let q = q.clone();
        async move { q.get(id).await.expect("get").expect("found") }
    };
    assert_eq!(info("t1").await.traceparent.as_deref(), Some(TRACE));
    assert_eq!(info("t2").await.traceparent, None);
    let mut got = claim(&q, 2).await;
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got[0].traceparent.as_deref(), Some(TRACE));
    // In flight, it still says so.
    assert_eq!(info("t1").await.traceparent.as_deref(), Some(TRACE));
    assert_eq!(got[1].traceparent, None);
    q.nack(&got[0], "again", Some(Duration::ZERO))
        .await
        .expect("nack");
    let again = claim(&q, 1).await.pop().expect("redelivered");
    assert_eq!(
        (again.attempt, again.traceparent.as_deref()),
        (2, Some(TRACE))
    );

    // The batch path without ids (a transaction, no script) carries it too.
    let batch = [Message::new(
        b"z".to_vec(),
        SendOptions::new().traceparent(TRACE),
    )];
    q.send_batch(&batch).await.expect("send");
    let got = claim(&q, 1).await.pop().expect("delivered");
    assert_eq!(got.traceparent.as_deref(), Some(TRACE));
}

#[tokio::test]
async fn a_malformed_traceparent_is_refused_and_nothing_written() {
    let (server, dq) = setup().await;
    let q = queue(&dq, "untraced");
    q.send(b"first", &SendOptions::new()).await.expect("send");
    let before = server.every_key_dumped("dq:{untraced}*");
    for bad in ["", "00-xyz", &TRACE.to_uppercase(), &format!("{TRACE}-00")] {
        let e = q
            .send(b"x", &SendOptions::new().traceparent(bad))
            .await
            .expect_err("malformed");
        assert!(matches!(e, delayq::Error::Invalid(_)), "{bad:?}: {e:?}");
    }
    assert_eq!(server.every_key_dumped("dq:{untraced}*"), before);
}

#[tokio::test]
async fn trace_context_needs_format_2_and_an_older_queue_is_refused_with_nothing_written() {
    let (server, _dq) = setup().await;
    let (q, before) = queue_of_format(&server, "old", 1).await;
    let traced = SendOptions::new().traceparent(TRACE);
    // One send (send.lua), and a batch without ids (the transaction that skips Lua).
    let batch = [Message::new(b"x".to_vec(), traced.clone())];
    for sent in [
        q.send(b"x", &traced).await.map(drop),
        q.send_batch(&batch).await.map(drop),
    ] {
        match sent {
            Err(delayq::Error::FormatTooOld { found, needed, .. }) => {
                assert_eq!((found, needed), (1, delayq::EXTENSION_FORMAT));
            }
            other => panic!("expected FormatTooOld, got {other:?}"),
        }
    }
    assert_eq!(
        server.every_key_dumped("dq:{old}*"),
        before,
        "something was written"
    );
}
