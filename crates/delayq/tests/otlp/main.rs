//! Spans exported over OTLP to a receiver the test starts (`otlp-receiver`), from a real
//! Redis: what arrives, and whether parents and links join each message's trace. A binary
//! of its own, since OpenTelemetry's tracer provider is global to the process; its tests
//! take turns (`SERIAL`) for the same reason.

#[path = "../delayq/common.rs"]
mod common;

use std::sync::Arc;
use std::time::Duration;

use delayq::telemetry::Telemetry;
use delayq::worker::WorkerBuilder;
use delayq::{Message, SendOptions};
use otlp_receiver::{OtlpReceiver, ReceivedSpan};
use tokio::sync::Mutex;
use tracing_subscriber::prelude::*;

use common::*;

static SERIAL: Mutex<()> = Mutex::const_new(());

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

// OTLP span kinds.
const CLIENT: i32 = 3;
const PRODUCER: i32 = 4;
const CONSUMER: i32 = 5;

/// Tracing to a fresh receiver, for as long as the guard lives (on this thread: the tests
/// run on a current-thread runtime, so spawned tasks see the same subscriber).
async fn traced() -> (OtlpReceiver, Telemetry, tracing::subscriber::DefaultGuard) {
    let receiver = OtlpReceiver::start().await.expect("receiver");
    let telemetry = Telemetry::otlp(&receiver.endpoint(), "otlp-test").expect("telemetry");
    let guard = tracing_subscriber::registry()
        .with(telemetry.layer())
        .set_default();
    (receiver, telemetry, guard)
}

/// The spans received once `names` have all arrived (after a flush).
async fn spans_named(
    receiver: &OtlpReceiver,
    telemetry: &Telemetry,
    names: &[&str],
) -> Vec<ReceivedSpan> {
    telemetry.flush().await.expect("flush");
    receiver
        .wait_for(Duration::from_secs(10), |spans| {
            names.iter().all(|n| spans.iter().any(|s| s.name == *n))
        })
        .await
        .unwrap_or_else(|seen| panic!("wanted {names:?}, received {seen:#?}"))
}

fn one<'a>(spans: &'a [ReceivedSpan], name: &str) -> &'a ReceivedSpan {
    let found: Vec<_> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name}: {spans:#?}");
    found[0]
}

fn traceparent_of(span: &ReceivedSpan) -> String {
    format!("00-{}-{}-01", span.trace_id, span.span_id)
}

#[tokio::test]
async fn a_workers_message_makes_one_trace_from_send_to_ack() {
    let _turn = SERIAL.lock().await;
    let (server, dq) = setup().await;
    let (receiver, telemetry, _guard) = traced().await;
    let q = queue(&dq, "orders");
    q.send(b"close 1", &SendOptions::new().id("o-1"))
        .await
        .expect("send");

    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let handler_seen = seen.clone();
    let worker = WorkerBuilder::new(q.clone())
        .build(move |d: delayq::Delivery| {
            let seen = handler_seen.clone();
            async move {
                // The handler's own spans nest in its process span.
                let _charge = tracing::info_span!("charge card").entered();
                seen.lock().expect("lock").push(d.traceparent.clone());
                Ok::<(), String>(())
            }
        })
        .expect("worker");
    let worker = spawn_worker(worker);
    wait_until(Duration::from_secs(10), "the message is acked", || async {
        is_empty(&q).await
    })
    .await;
    worker.shutdown().await;

    let spans = spans_named(
        &receiver,
        &telemetry,
        &[
            "send orders",
            "receive orders",
            "process orders",
            "charge card",
            "ack orders",
        ],
    )
    .await;
    let send = one(&spans, "send orders");
    assert_eq!(
        (send.kind, send.parent_span_id.as_deref()),
        (PRODUCER, None)
    );
    assert_eq!(send.attribute("messaging.system"), Some("delayq"));
    assert_eq!(send.attribute("messaging.message.id"), Some("o-1"));
    assert_eq!(send.service, "otlp-test");
    // The message carried the send span's context to its handler.
    assert_eq!(
        *seen.lock().expect("lock"),
        vec![Some(traceparent_of(send))]
    );

    let receive = one(&spans, "receive orders");
    assert_eq!(receive.kind, CLIENT);
    assert_eq!(
        receive.links,
        vec![(send.trace_id.clone(), send.span_id.clone())]
    );
    let process = one(&spans, "process orders");
    assert_eq!(process.kind, CONSUMER);
    assert_eq!(process.trace_id, send.trace_id);
    assert_eq!(process.parent_span_id.as_ref(), Some(&send.span_id));
    assert_eq!(process.attribute("messaging.message.id"), Some("o-1"));
    let charge = one(&spans, "charge card");
    assert_eq!(charge.parent_span_id.as_ref(), Some(&process.span_id));
    let ack = one(&spans, "ack orders");
    assert_eq!(ack.trace_id, send.trace_id);
    assert_eq!(ack.parent_span_id.as_ref(), Some(&send.span_id));
    assert!(!ack.failed);
    drop(server);
}

#[tokio::test]
async fn a_send_joins_the_callers_trace_and_a_nack_the_messages() {
    let _turn = SERIAL.lock().await;
    let (_server, dq) = setup().await;
    let (receiver, telemetry, _guard) = traced().await;
    let q = queue(&dq, "mail");

    // In the caller's span: the send is its child, and carries the send span's context.
    let request = tracing::info_span!("place order");
    async {
        q.send(b"in span", &SendOptions::new().id("m-1"))
            .await
            .expect("send");
        // A traceparent of another trace wins: the message joins that trace, as given.
        q.send(b"given", &SendOptions::new().id("m-2").traceparent(TRACE))
            .await
            .expect("send");
    }
    .instrument_in(request)
    .await;

    let mut got = claim(&q, 2).await;
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(got[1].traceparent.as_deref(), Some(TRACE));
    q.nack(&got[1], "mail server down", Some(Duration::from_secs(60)))
        .await
        .expect("nack");
    q.ack(&got[0]).await.expect("ack");

    let spans = spans_named(
        &receiver,
        &telemetry,
        &["place order", "send mail", "nack mail", "ack mail"],
    )
    .await;
    let place = one(&spans, "place order");
    let sends: Vec<_> = spans.iter().filter(|s| s.name == "send mail").collect();
    let in_span = sends
        .iter()
        .find(|s| s.attribute("messaging.message.id") == Some("m-1"))
        .expect("send of m-1");
    assert_eq!(in_span.trace_id, place.trace_id);
    assert_eq!(in_span.parent_span_id.as_ref(), Some(&place.span_id));
    assert_eq!(
        got[0].traceparent.as_deref(),
        Some(&*traceparent_of(in_span))
    );
    let given = sends
        .iter()
        .find(|s| s.attribute("messaging.message.id") == Some("m-2"))
        .expect("send of m-2");
    assert_eq!(
        (given.trace_id.as_str(), given.parent_span_id.as_deref()),
        (TRACE_ID, Some(CALLER_SPAN))
    );
    let nack = one(&spans, "nack mail");
    assert_eq!(
        (nack.trace_id.as_str(), nack.parent_span_id.as_deref()),
        (TRACE_ID, Some(CALLER_SPAN))
    );
    let ack = one(&spans, "ack mail");
    assert_eq!(ack.parent_span_id.as_ref(), Some(&in_span.span_id));
}

#[tokio::test]
async fn a_batch_is_one_send_span_and_its_untraced_messages_carry_it() {
    let _turn = SERIAL.lock().await;
    let (_server, dq) = setup().await;
    let (receiver, telemetry, _guard) = traced().await;
    let q = queue(&dq, "bulk");
    let batch = [
        Message::new(b"a".to_vec(), SendOptions::new()),
        Message::new(b"b".to_vec(), SendOptions::new().traceparent(TRACE)),
        Message::new(b"c".to_vec(), SendOptions::new().id("c")),
    ];
    q.send_batch(&batch).await.expect("send");
    let spans = spans_named(&receiver, &telemetry, &["send bulk"]).await;
    let send = one(&spans, "send bulk");
    assert_eq!(send.attribute("messaging.batch.message_count"), Some("3"));
    let mut carried: Vec<_> = claim(&q, 3)
        .await
        .into_iter()
        .map(|d| {
            (
                String::from_utf8_lossy(&d.payload).into_owned(),
                d.traceparent,
            )
        })
        .collect();
    carried.sort();
    let batch_context = Some(traceparent_of(send));
    assert_eq!(
        carried,
        vec![
            ("a".to_owned(), batch_context.clone()),
            ("b".to_owned(), Some(TRACE.to_owned())),
            ("c".to_owned(), batch_context),
        ]
    );
}

#[tokio::test]
async fn tracing_never_fails_a_send_to_a_queue_too_old_to_carry_it() {
    let _turn = SERIAL.lock().await;
    let (server, _dq) = setup().await;
    let (receiver, telemetry, _guard) = traced().await;
    let (q, _) = queue_of_format(&server, "old", 1).await;
    q.send(b"x", &SendOptions::new().id("x"))
        .await
        .expect("send");
    let spans = spans_named(&receiver, &telemetry, &["send old"]).await;
    let send = spans
        .iter()
        .find(|s| s.attribute("messaging.message.id") == Some("x"))
        .expect("the send of x");
    assert!(!send.failed);
    let x = claim(&q, 2).await.into_iter().find(|d| d.id == "x");
    assert_eq!(x.expect("x delivered").traceparent, None);
}

/// `Instrument::instrument`, named so as not to read as the test's subject.
trait InstrumentIn: Sized {
    fn instrument_in(self, span: tracing::Span) -> tracing::instrument::Instrumented<Self>;
}

impl<F: std::future::Future> InstrumentIn for F {
    fn instrument_in(self, span: tracing::Span) -> tracing::instrument::Instrumented<Self> {
        tracing::Instrument::instrument(self, span)
    }
}

#[tokio::test]
async fn a_trace_not_sampled_stays_unsampled_through_the_handler() {
    let _turn = SERIAL.lock().await;
    let (_server, dq) = setup().await;
    let (receiver, telemetry, _guard) = traced().await;
    let q = queue(&dq, "sampling");
    // The caller's trace is not sampled (flags 00); a second message's is, as a control.
    let unsampled = format!("00-{TRACE_ID}-{CALLER_SPAN}-00");
    q.send(b"u", &SendOptions::new().id("u").traceparent(&unsampled))
        .await
        .expect("send");
    let sampled = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    q.send(b"s", &SendOptions::new().id("s").traceparent(sampled))
        .await
        .expect("send");
    let worker = WorkerBuilder::new(q.clone())
        .build(|d: delayq::Delivery| async move {
            let _own = tracing::info_span!("handler work", message = %d.id).entered();
            Ok::<(), String>(())
        })
        .expect("worker");
    let worker = spawn_worker(worker);
    wait_until(Duration::from_secs(10), "both are acked", || async {
        is_empty(&q).await
    })
    .await;
    worker.shutdown().await;
    let spans = spans_named(&receiver, &telemetry, &["process sampling", "handler work"]).await;
    let of = |id: &str| -> Vec<&str> {
        spans
            .iter()
            .filter(|s| {
                s.attribute("messaging.message.id") == Some(id)
                    || s.attribute("message") == Some(id)
            })
            .map(|s| s.name.as_str())
            .collect()
    };
    assert!(of("s").contains(&"handler work"), "{spans:#?}");
    // Nothing of the unsampled trace: not its send, process or ack, nor the handler's own.
    assert!(of("u").is_empty(), "{:?}", of("u"));
    assert!(spans.iter().all(|s| s.trace_id != TRACE_ID), "{spans:#?}");
}
