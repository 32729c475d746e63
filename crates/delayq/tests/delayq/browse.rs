//! Paging through each state, and searching payloads, in bounded steps: every message is
//! listed once, in its state's order, on one partition and on several; a cursor survives
//! messages leaving; a search looks at no more than its budget per step; bad cursors are
//! refused.

use std::collections::HashSet;
use std::time::Duration;

use delayq::{Cursor, DelayQ, Error, Queue, SendOptions, State};

use crate::common::*;

const LEASE: Duration = Duration::from_secs(60);

/// Ids of every message in `state`, listed in pages of `limit`; checks each page's bound.
async fn list_all(q: &Queue, state: State, limit: usize) -> Vec<delayq::MessageInfo> {
    let mut all = Vec::new();
    let mut cursor: Option<Cursor> = None;
    for _ in 0..1000 {
        let page = q.list(state, cursor.as_ref(), limit).await.expect("list");
        assert!(page.messages.len() <= limit, "a page over its limit");
        assert!(page.messages.iter().all(|m| m.state == state));
        all.extend(page.messages);
        match page.next {
            // The text form is what the HTTP API hands out: go through it.
            Some(next) => cursor = Some(Cursor::parse(&next.to_string()).expect("own cursor")),
            None => return all,
        }
    }
    panic!("listing {state:?} did not end");
}

fn ids(messages: &[delayq::MessageInfo]) -> Vec<String> {
    messages.iter().map(|m| m.id.clone()).collect()
}

/// A queue holding 3 dead, 4 in-flight, 8 ready and 25 delayed messages of mixed priorities;
/// returns the ids per state, delayed in due order.
async fn fill(dq: &DelayQ, q: &Queue) -> [Vec<String>; 4] {
    let mut consumer = q.consumer().await.expect("consumer");
    let mut dead = Vec::new();
    for i in 0..3 {
        let opts = SendOptions::new().max_attempts(1).id(format!("dead-{i}"));
        q.send(format!("dead payload {i}"), &opts)
            .await
            .expect("send");
        let d = receive_one(&mut consumer, LEASE).await;
        q.nack(&d, "no good", None).await.expect("nack");
        dead.push(d.id);
    }
    let mut ready = Vec::new();
    for i in 0..12 {
        let opts = SendOptions::new().priority([3, 5, 7][i % 3]);
        ready.push(q.send(format!("ready {i}"), &opts).await.expect("send").id);
    }
    let held = consumer
        .receive(&receiving(4, LEASE, Duration::from_secs(5)))
        .await
        .expect("receive");
    assert_eq!(held.len(), 4);
    let in_flight: Vec<String> = held.iter().map(|d| d.id.clone()).collect();
    ready.retain(|id| !in_flight.contains(id));
    let mut delayed = Vec::new();
    // Due in the reverse order of sending, priorities mixed: the list's order is due time.
    for i in (0..25u64).rev() {
        let opts = SendOptions::new()
            .delay(Duration::from_secs(3600 + i))
            .priority([2, 5, 9][i as usize % 3]);
        delayed.push(q.send(format!("later {i}"), &opts).await.expect("send").id);
    }
    delayed.reverse();
    let _ = dq;
    [delayed, ready, in_flight, dead]
}

#[tokio::test]
async fn every_state_pages_through_all_its_messages_once_in_order() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("three", 3)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        let [delayed, ready, in_flight, dead] = fill(&dq, &q).await;

        let listed = list_all(&q, State::Delayed, 4).await;
        assert_eq!(ids(&listed), delayed, "{name}: delayed in due order");
        assert!(listed.windows(2).all(|w| w[0].due_ms <= w[1].due_ms));
        assert_eq!(listed[0].payload, b"later 0");
        assert_eq!(listed[0].priority, 2);

        let listed = ids(&list_all(&q, State::Ready, 3).await);
        assert_eq!(
            listed.iter().collect::<HashSet<_>>(),
            ready.iter().collect::<HashSet<_>>(),
            "{name}: ready"
        );
        assert_eq!(
            listed.len(),
            ready.len(),
            "{name}: a ready message listed twice"
        );

        let listed = list_all(&q, State::InFlight, 3).await;
        let mut got = ids(&listed);
        got.sort();
        let mut want = in_flight.clone();
        want.sort();
        assert_eq!(got, want, "{name}: in flight");
        assert!(listed
            .iter()
            .all(|m| m.lease_deadline_ms.is_some() && m.attempts == 1));

        let listed = list_all(&q, State::Dead, 2).await;
        assert_eq!(ids(&listed), dead, "{name}: dead, oldest death first");
        assert_eq!(listed[0].last_error.as_deref(), Some("no good"));
        assert!(listed.iter().all(|m| m.died_at_ms.is_some()));

        // One page of everything ends at once.
        let page = q.list(State::Delayed, None, 1000).await.expect("list");
        assert_eq!(page.messages.len(), 25);
        assert!(page.next.is_none());
    }
}

#[tokio::test]
async fn a_cursor_goes_on_after_the_messages_already_seen_have_left() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("four", 4)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        let mut sent = Vec::new();
        for i in 0..20u64 {
            let opts = SendOptions::new().delay(Duration::from_secs(600 + i));
            sent.push(q.send("x", &opts).await.expect("send").id);
        }
        let first = q.list(State::Delayed, None, 5).await.expect("page 1");
        assert_eq!(ids(&first.messages), sent[..5]);
        // The messages seen are cancelled, and one not yet seen: the next page starts right
        // after the last one seen, with nothing skipped.
        for id in ids(&first.messages).iter().chain([&sent[6]]) {
            q.cancel(id).await.expect("cancel");
        }
        let next = first.next.expect("more");
        let second = q
            .list(State::Delayed, Some(&next), 5)
            .await
            .expect("page 2");
        let want: Vec<String> = [5, 7, 8, 9, 10].iter().map(|&i| sent[i].clone()).collect();
        assert_eq!(ids(&second.messages), want, "{name}");
    }
}

#[tokio::test]
async fn a_search_looks_at_each_message_once_within_its_budget_per_step() {
    let (_server, dq) = setup().await;
    for (name, partitions) in [("one", 1), ("three", 3)] {
        let q = dq.create_queue(name, partitions).await.expect("create");
        let mut want = HashSet::new();
        for i in 0..300u64 {
            let payload = if i % 7 == 0 {
                format!(r#"{{"order": {i}, "note": "card declined"}}"#)
            } else {
                format!(r#"{{"order": {i}, "note": "paid"}}"#)
            };
            let id = q
                .send(payload, &SendOptions::new().delay(Duration::from_secs(900)))
                .await
                .expect("send")
                .id;
            if i % 7 == 0 {
                want.insert(id);
            }
        }
        let (mut found, mut scanned, mut steps) = (HashSet::new(), 0, 0);
        let mut cursor: Option<Cursor> = None;
        loop {
            let page = q
                .search(State::Delayed, b"declined", cursor.as_ref(), 40)
                .await
                .expect("search");
            assert!(
                page.scanned <= 40 * partitions as u64,
                "a step over its budget"
            );
            assert!(page
                .messages
                .iter()
                .all(|m| m.payload.windows(8).any(|w| w == b"declined")));
            for m in page.messages {
                assert!(found.insert(m.id), "{name}: a match found twice");
            }
            scanned += page.scanned;
            steps += 1;
            match page.next {
                Some(next) => cursor = Some(next),
                None => break,
            }
            assert!(steps < 100, "the search did not end");
        }
        assert_eq!(found, want, "{name}: matches");
        assert_eq!(scanned, 300, "{name}: every message looked at once");
        assert!(steps >= 300 / (40 * partitions), "{name}: {steps} steps");
        // An id matches too.
        let some_id = want.iter().next().expect("one").clone();
        let page = q
            .search(State::Delayed, some_id.as_bytes(), None, 1000)
            .await
            .expect("search by id");
        assert!(page.messages.iter().any(|m| m.id == some_id));
    }
}

#[tokio::test]
async fn bad_cursors_and_bounds_are_refused() {
    let (_server, dq) = setup().await;
    let q = dq.create_queue("bad", 2).await.expect("create");
    for i in 0..3u64 {
        q.send("x", &SendOptions::new().delay(Duration::from_secs(60 + i)))
            .await
            .expect("send");
    }
    for text in [
        "",
        "zz",
        "s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.s.x",
        "12.ab",
    ] {
        assert!(Cursor::parse(text).is_err(), "{text:?} parsed");
    }
    let page = q.list(State::Delayed, None, 1).await.expect("list");
    let delayed_cursor = page.next.expect("more");
    // A cursor of the delayed list is not one of the dead letters.
    let err = q
        .list(State::Dead, Some(&delayed_cursor), 1)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    // Nor one of a queue with another partition count.
    let single = queue(&dq, "single");
    let err = single
        .list(State::Delayed, Some(&delayed_cursor), 1)
        .await
        .expect_err("refused");
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    for limit in [0, 1001] {
        assert!(q.list(State::Delayed, None, limit).await.is_err());
        assert!(q.search(State::Delayed, b"x", None, limit).await.is_err());
    }
    assert!(q.search(State::Delayed, b"", None, 10).await.is_err());
}

/// A list or search step returns each payload's first bytes only (a preview's worth, cut in
/// Redis), with the whole payload's length, so that a page of big payloads costs Redis and
/// the caller a bounded reply; a search still looks through all of each payload.
#[tokio::test]
async fn pages_carry_payload_previews_not_whole_payloads() {
    let (_server, dq) = setup().await;
    let q = queue(&dq, "big");
    let size = 300 * 1024;
    for i in 0..3 {
        let mut payload = vec![b'x'; size];
        payload[size - 6..].copy_from_slice(format!("tail-{i}").as_bytes());
        q.send(&payload, &SendOptions::new()).await.expect("send");
    }
    let page = q.list(State::Ready, None, 10).await.expect("list");
    assert_eq!(page.messages.len(), 3);
    for m in &page.messages {
        assert_eq!(m.payload.len(), delayq::BROWSE_PAYLOAD_BYTES, "{}", m.id);
        assert_eq!(m.payload_len, size, "{}", m.id);
    }
    let found = q
        .search(State::Ready, b"tail-1", None, 10)
        .await
        .expect("search");
    assert_eq!(found.messages.len(), 1, "found past the preview");
    assert_eq!(
        found.messages[0].payload.len(),
        delayq::BROWSE_PAYLOAD_BYTES
    );
    // get still gives the whole message.
    let whole = q
        .get(&found.messages[0].id)
        .await
        .expect("get")
        .expect("there");
    assert_eq!((whole.payload.len(), whole.payload_len), (size, size));
}
