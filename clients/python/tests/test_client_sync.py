"""The sync client against a real server: send, receive, ack, and what each send option and
admin call does on the server."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from delayq import (
    Backoff, CancelMany, CancelResult, Client, ConflictError, NewMessage, NotFoundError,
)
from serverproc import wait_until


def test_send_receive_ack(client: Client, queue: str) -> None:
    sent = client.send(queue, {"order": 1234}, id="close-1234")
    assert sent.id == "close-1234" and not sent.duplicate
    [d] = client.receive(queue, max=5, lease="10s", wait="2s")
    assert (d.queue, d.id, d.attempt, d.payload) == (queue, "close-1234", 1, {"order": 1234})
    assert client.get(queue, "close-1234").state == "in_flight"
    client.ack(queue, d.receipt)
    with pytest.raises(NotFoundError):
        client.get(queue, "close-1234")
    assert client.stats(queue).in_flight == 0


def test_ack_and_receive_acks_then_receives_in_one_request(client: Client, queue: str) -> None:
    for n in range(3):
        client.send(queue, {"n": n})
    first = client.receive(queue, max=2)
    client.ack(queue, first[1].receipt)
    acked, got = client.ack_and_receive(queue, [d.receipt for d in first], max=5, wait="1s")
    assert [(a.receipt, a.ok) for a in acked] == [(first[0].receipt, True), (first[1].receipt, False)]
    assert [d.payload for d in got] == [{"n": 2}]
    acked, got = client.ack_and_receive(queue, [got[0].receipt])
    assert [a.ok for a in acked] == [True] and got == []
    stats = client.stats(queue)
    assert stats.in_flight + stats.ready + stats.delayed == 0


def test_a_repeated_caller_id_is_a_duplicate(client: Client, queue: str) -> None:
    first = client.send(queue, "a", id="only-once")
    second = client.send(queue, "b", id="only-once")
    assert not first.duplicate and second.duplicate and second.id == "only-once"
    assert client.get(queue, "only-once").payload == "a"


def test_payload_kinds_and_ids_come_back_as_sent(client: Client, queue: str) -> None:
    raw = bytes(range(256))
    client.send(queue, raw, id="bytes/1:a@b")
    client.send(queue, None, id="null")
    assert client.get(queue, "bytes/1:a@b").payload == raw
    assert client.get(queue, "null").payload is None


def test_every_send_option_reaches_the_server(client: Client, queue: str) -> None:
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client.send(queue, {"x": 1}, id="opts", priority=8, max_attempts=7,
                backoff=Backoff.exponential("1s", "60s", factor=3, jitter_percent=10),
                ttl=timedelta(minutes=5), group="tenant-7", handler_timeout="90s",
                traceparent=trace, push_headers={"x-tenant": "7"})
    m = client.get(queue, "opts")
    assert (m.priority, m.max_attempts, m.raw["group"], m.raw["traceparent"]) == (
        8, 7, "tenant-7", trace)
    assert "expires_at_ms" in m.raw
    assert m.payload == {"x": 1}  # the push envelope is not part of the payload
    [d] = client.receive(queue, wait="2s")
    assert d.handler_timeout_ms == 90_000 and d.group == "tenant-7"


def test_delay_deliver_at_and_reschedule(client: Client, queue: str) -> None:
    later = client.send(queue, 1, id="later", delay="1h")
    at = client.send(queue, 2, id="at",
                     deliver_at=datetime.now(timezone.utc) + timedelta(hours=1))
    assert client.get(queue, "later").state == "delayed"
    assert at.due_ms is not None and abs(at.due_ms / 1000 - (time.time() + 3600)) < 60
    assert client.receive(queue) == []
    due = client.reschedule(queue, "later", delay=timedelta(0))
    assert due <= time.time() * 1000 + 1000
    [d] = client.receive(queue, wait="2s")
    assert d.id == "later"
    client.ack(queue, d.receipt)
    assert client.cancel(queue, "at") == "delayed"


def test_cancel_many_says_what_became_of_each_id(client: Client, queue: str) -> None:
    client.send(queue, "a", id="m1", delay="1h")
    client.send(queue, "b", id="m2")
    [held] = client.receive(queue, wait="2s")
    assert held.id == "m2"
    assert client.cancel_many(queue, ["m1", "nope", "m2"]) == CancelMany(
        cancelled=1,
        results=[
            CancelResult("m1", "cancelled", "delayed"),
            CancelResult("nope", "not_found"),
            CancelResult("m2", "not_cancelled", "in_flight"),
        ],
    )
    client.ack(queue, held.receipt)


def test_batch_is_all_or_nothing(client: Client, queue: str) -> None:
    results = client.send_batch(queue, ["plain", NewMessage({"k": 1}, id="b-1", priority=9)])
    assert [r.duplicate for r in results] == [False, False] and results[1].id == "b-1"
    deliveries = client.receive(queue, max=10, wait="2s")
    # Priority 9 comes first among due messages.
    assert [d.payload for d in deliveries] == [{"k": 1}, "plain"]
    acked = client.ack_many(queue, [d.receipt for d in deliveries])
    assert all(r.ok for r in acked)


def test_extend_and_release(client: Client, queue: str) -> None:
    client.send(queue, "x", id="lease")
    [d] = client.receive(queue, lease="5s", wait="2s")
    deadline = client.extend(queue, d.receipt, lease="60s")
    assert deadline > d.lease_deadline_ms
    client.release(queue, d.receipt)
    [again] = client.receive(queue, wait="2s")
    assert again.id == "lease"
    client.ack(queue, again.receipt)


def test_pause_resume_and_stats(client: Client, queue: str) -> None:
    client.send(queue, "x")
    assert client.pause(queue).paused
    assert client.receive(queue) == []
    assert client.resume(queue).paused is False
    assert len(client.receive(queue, wait="2s")) == 1
    assert any(q.name == queue for q in client.list_queues())
    assert client.health() and client.ready()


def test_nack_retry_after_and_dead_letters(client: Client, queue: str) -> None:
    client.send(queue, "job", id="j1")
    [d] = client.receive(queue, wait="2s")
    assert client.nack(queue, d.receipt, "flaky", retry_after="200ms") == "retry"
    [d2] = wait_until(lambda: client.receive(queue, wait="1s"), 10, "the retry")
    assert d2.attempt == 2
    assert client.nack(queue, d2.receipt, "bad input", dead=True) == "dead"
    page = client.dead_letters(queue)
    assert page.total == 1 and page.items[0].last_error == "bad input"
    assert [e.error for e in page.items[0].errors] == ["flaky", "bad input"]
    assert client.requeue_dead(queue, "j1") == 1
    [d3] = client.receive(queue, wait="2s")
    client.nack(queue, d3.receipt, "again", dead=True)
    assert client.purge_all_dead(queue) == 1
    assert client.dead_letters(queue).total == 0


def test_delete_queue_refuses_a_queue_with_messages_unless_forced(
    client: Client, queue: str
) -> None:
    client.send(queue, {"n": 1}, delay=timedelta(hours=1))
    with pytest.raises(ConflictError) as refused:
        client.delete_queue(queue)
    assert refused.value.code == "queue_not_empty"
    deleted = client.delete_queue(queue, force=True)
    assert (deleted.queue, deleted.messages, deleted.raced) == (queue, 1, False)
    assert queue not in [q.name for q in client.list_queues()]
    with pytest.raises(NotFoundError):
        client.delete_queue(queue)
