//! Several queues served by one consumer or one worker: weights, strict order, and waiting
//! on all of them at once.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use delayq::worker::WorkerBuilder;
use delayq::{DelayQ, Delivery, Message, QueueSet, SendOptions};

use crate::common::*;

/// Queue names in the order their messages were handled.
#[derive(Clone, Default)]
struct Handled(Arc<Mutex<Vec<String>>>);

impl Handled {
    fn push(&self, queue: &str) {
        self.0.lock().expect("handled").push(queue.to_owned());
    }

    fn get(&self) -> Vec<String> {
        self.0.lock().expect("handled").clone()
    }

    fn len(&self) -> usize {
        self.0.lock().expect("handled").len()
    }
}

async fn fill(q: &delayq::Queue, n: usize) {
    let batch: Vec<Message> = (0..1000)
        .map(|i| Message::new(format!("m{i}"), SendOptions::new()))
        .collect();
    for _ in 0..n / 1000 {
        q.send_batch(&batch).await.expect("send batch");
    }
}

/// Runs `worker` until it has handled `n` messages (acking each), then shuts it down; the
/// queue of each message handled, in order.
async fn handle_until(worker: WorkerBuilder, n: usize, limit: Duration) -> Vec<String> {
    let handled = Handled::default();
    let worker = worker
        .build({
            let handled = handled.clone();
            move |d: Delivery| {
                let handled = handled.clone();
                async move {
                    handled.push(d.queue.as_str());
                    Ok::<(), String>(())
                }
            }
        })
        .expect("build worker");
    let running = spawn_worker(worker);
    wait_until(limit, &format!("{n} messages handled"), || async {
        handled.len() >= n
    })
    .await;
    running.shutdown().await;
    handled.get()
}

#[tokio::test]
async fn a_weighted_worker_shares_its_slots_by_weight_while_every_queue_has_work() {
    let (_server, dq) = setup().await;
    let weights = [("critical", 6u32), ("default", 3), ("low", 1)];
    let queues: Vec<_> = weights.iter().map(|(n, w)| (queue(&dq, n), *w)).collect();
    // Each queue holds more than the whole measurement takes, so all have work throughout.
    for (q, _) in &queues {
        fill(q, 11_000).await;
    }
    let set = QueueSet::weighted(queues.clone()).expect("set");
    let worker = WorkerBuilder::serving(set).concurrency(4).batch_size(4);
    let handled = handle_until(worker, 10_000, Duration::from_secs(120)).await;

    let first: Vec<String> = handled.into_iter().take(10_000).collect();
    for (name, weight) in weights {
        let share = first.iter().filter(|q| *q == name).count() as f64 / 10_000.0;
        let expected = f64::from(weight) / 10.0;
        eprintln!("{name}: {:.2}% (weight {weight} of 10)", share * 100.0);
        assert!(
            (share - expected).abs() <= 0.03,
            "{name}: {:.1}% of the first 10,000, expected {:.0}% ± 3",
            share * 100.0,
            expected * 100.0
        );
    }
}

#[tokio::test]
async fn a_strict_worker_serves_a_lower_queue_only_when_the_higher_ones_have_nothing_due() {
    let (_server, dq) = setup().await;
    let (high, mid, low) = (queue(&dq, "high"), queue(&dq, "mid"), queue(&dq, "low"));
    for q in [&low, &mid, &high] {
        fill(q, 1000).await;
    }
    let set = QueueSet::strict([high.clone(), mid.clone(), low.clone()]).expect("set");
    let worker = WorkerBuilder::serving(set).concurrency(1);
    let order = handle_until(worker, 3000, Duration::from_secs(60)).await;
    let expected: Vec<String> = ["high", "mid", "low"]
        .iter()
        .flat_map(|q| std::iter::repeat_n(q.to_string(), 1000))
        .collect();
    assert!(order == expected, "handled out of priority order");
}

#[tokio::test]
async fn a_consumer_of_several_queues_waits_on_all_and_takes_the_first_due() {
    let (server, dq) = setup().await;
    let [a, b, c] = ["a", "b", "c"].map(|n| queue(&dq, n));
    let set = QueueSet::weighted([(a.clone(), 1), (b.clone(), 1), (c.clone(), 1)]).expect("set");
    let mut consumer = set.consumer().await.expect("consumer");
    let lease = Duration::from_secs(30);

    // Due times known before the wait: the earliest, on the last queue, comes first.
    a.send("late", &SendOptions::new().delay(Duration::from_secs(3)))
        .await
        .expect("send");
    let early = c
        .send(
            "early",
            &SendOptions::new().delay(Duration::from_millis(300)),
        )
        .await
        .expect("send");
    let got = consumer
        .receive(&receiving(10, lease, Duration::from_secs(10)))
        .await
        .expect("receive");
    assert_eq!(got.len(), 1, "only the early message is due");
    assert_eq!(
        (got[0].queue.as_str(), got[0].id.as_str()),
        ("c", early.id.as_str())
    );
    assert!(now_ms() >= got[0].due_ms, "delivered before its due time");
    c.ack(&got[0]).await.expect("ack");

    // A send while it waits, to a queue that was idle: heard through that queue's wake-up.
    // Unheard, the wait would end when queue a's message comes due, and return that one.
    // A consumer of a client of its own (whose claims no other consumer's news spares)
    // first claims on each of the three queues, then waits: once Redis ran those claims, a
    // send can reach it only through the wake-up.
    let other = DelayQ::connect(&server.url()).await.expect("connect");
    let set = QueueSet::weighted(["a", "b", "c"].map(|n| (queue(&other, n), 1))).expect("set");
    let consumer = set.consumer().await.expect("consumer");
    let claims_before = server.script_calls();
    let waiting = tokio::spawn(async move {
        let mut consumer = consumer;
        let got = consumer
            .receive(&receiving(10, lease, Duration::from_secs(20)))
            .await
            .expect("receive");
        (consumer, got)
    });
    wait_until(
        Duration::from_secs(10),
        "the waiting consumer's claims",
        || async { server.script_calls() >= claims_before + 3 },
    )
    .await;
    let sent = b.send("now", &SendOptions::new()).await.expect("send");
    let (mut consumer, got) = waiting.await.expect("receive task");
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].queue.as_str(), got[0].id.as_str()),
        ("b", sent.id.as_str())
    );

    // Then the message on the first queue, at its time.
    let got = consumer
        .receive(&receiving(10, lease, Duration::from_secs(10)))
        .await
        .expect("receive");
    assert_eq!(got[0].queue.as_str(), "a");
    assert_eq!(got[0].payload, b"late");
}

#[tokio::test]
async fn a_queue_set_refuses_duplicates_bad_weights_and_emptiness() {
    let (_server, dq) = setup().await;
    let (a, b) = (queue(&dq, "a"), queue(&dq, "b"));
    let cases = [
        QueueSet::strict([]).err(),
        QueueSet::strict([a.clone(), b.clone(), a.clone()]).err(),
        QueueSet::weighted([(a.clone(), 1), (b.clone(), 0)]).err(),
        QueueSet::weighted([(a.clone(), 1), (b.clone(), 1001)]).err(),
    ];
    let texts: Vec<String> = cases
        .into_iter()
        .map(|e| e.expect("refused").to_string())
        .collect();
    assert!(texts[0].contains("1 to 64 queues"), "{}", texts[0]);
    assert!(
        texts[1].contains("queue a is in the set twice"),
        "{}",
        texts[1]
    );
    assert!(
        texts[2].contains("weight is 1 to 1000, not 0"),
        "{}",
        texts[2]
    );
    assert!(texts[3].contains("not 1001"), "{}", texts[3]);
}
