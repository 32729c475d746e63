"""The clients' shared scenarios (clients/SCENARIOS.md), one test each (S7, push verify, is
in test_push.py): what a user would check, against a real server; every wait has a
deadline."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Dict, Iterator, List, Set, Tuple

import httpx
import pytest

from delayq import (
    AsyncClient, AsyncWorker, Backoff, Client, Delivery, InvalidInputError, LeaseLostError,
    NewMessage, NotFoundError, TooLargeError, UnauthorizedError, Worker, error_text,
)
from serverproc import ServerProcess, wait_until


def gone(client: Client, queue: str, id: str) -> bool:
    try:
        client.get(queue, id)
        return False
    except NotFoundError:
        return True


def test_S1_send_receive_ack(client: Client, queue: str) -> None:
    sent = client.send(queue, {"order": 1}, id="s1", delay="200ms")
    assert sent.id == "s1" and not sent.duplicate and sent.due_ms is not None
    assert client.receive(queue) == []  # not due yet
    [d] = client.receive(queue, wait="5s")  # a long poll, answered once it is due
    assert time.time() * 1000 >= sent.due_ms - 5  # not before its due time (one clock)
    assert (d.id, d.payload, d.attempt, d.queue, d.due_ms) == (
        "s1", {"order": 1}, 1, queue, sent.due_ms)
    client.ack(queue, d.receipt)
    with pytest.raises(NotFoundError):
        client.get(queue, "s1")
    assert client.receive(queue) == []


def test_S2_retry_with_backoff(client: Client, queue: str) -> None:
    client.send(queue, "job", id="s2", max_attempts=3, backoff=Backoff.fixed("200ms"))
    [first] = client.receive(queue, wait="2s")
    nacked_at = time.monotonic()
    assert client.nack(queue, first.receipt, "downstream said 503") == "retry"
    assert client.receive(queue) == []  # not before its backoff
    [second] = client.receive(queue, wait="5s")
    waited = time.monotonic() - nacked_at
    assert second.attempt == 2 and waited >= 0.195  # ms resolution on the server's clock
    [error] = client.get(queue, "s2").errors
    assert (error.attempt, error.error) == (1, "downstream said 503")
    assert second.due_ms - error.at_ms >= 200  # due 200 ms after the nack, by the server
    client.ack(queue, second.receipt)


def test_S3_dead_letter_requeue_and_purge(client: Client, queue: str) -> None:
    client.send(queue, {"n": 1}, id="s3-a", max_attempts=1)
    [d] = client.receive(queue, wait="2s")
    assert client.nack(queue, d.receipt, "order 1 is gone") == "dead"
    page = client.dead_letters(queue)
    assert page.total == 1 and [x.id for x in page.items] == ["s3-a"]
    assert page.items[0].last_error == "order 1 is gone"
    assert client.requeue_dead(queue, "s3-a") == 1
    [again] = client.receive(queue, wait="2s")
    assert (again.id, again.payload) == ("s3-a", {"n": 1})
    client.ack(queue, again.receipt)
    # Purge, on another one.
    client.send(queue, {"n": 2}, id="s3-b", max_attempts=1)
    [d2] = client.receive(queue, wait="2s")
    client.nack(queue, d2.receipt, "bad input")
    assert client.dead_letters(queue).total == 1
    assert client.purge_dead(queue, "s3-b") == 1
    assert client.dead_letters(queue).total == 0 and gone(client, queue, "s3-b")


def test_S4_an_ordered_group_is_handled_one_at_a_time_in_send_order(
        client: Client, queue: str) -> None:
    client.configure(queue, group_concurrency=1)
    for n in range(5):
        client.send(queue, {"n": n}, group="customer:42")
    spans: List[Tuple[int, float, float]] = []
    running, peak = [0], [0]
    lock = threading.Lock()

    def handle(d: Delivery) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        start = time.monotonic()
        time.sleep(0.05)  # the work
        with lock:
            running[0] -= 1
            spans.append((d.payload["n"], start, time.monotonic()))

    worker = Worker(client, queue, handle, concurrency=4, poll_wait="2s").start()
    try:
        wait_until(lambda: len(spans) == 5, 20, "the group's five messages")
    finally:
        assert worker.stop(timeout="10s")
    assert [n for n, _, _ in spans] == [0, 1, 2, 3, 4]
    assert peak[0] == 1
    for (_, _, end), (_, next_start, _) in zip(spans, spans[1:]):
        assert next_start >= end  # no overlap


def test_S5_upsert_replaces_a_delayed_message(client: Client, queue: str) -> None:
    client.send(queue, {"v": "old"}, id="u1", delay="1h")
    replaced = client.send(queue, {"v": "new"}, id="u1", on_duplicate="replace")
    assert not replaced.duplicate and replaced.replaced == "delayed"
    deliveries = client.receive(queue, max=10, wait="2s")
    assert [(d.id, d.payload) for d in deliveries] == [("u1", {"v": "new"})]
    assert client.send(queue, {"v": "again"}, id="u1").duplicate
    client.ack(queue, deliveries[0].receipt)
    assert client.receive(queue) == []


def _s6_load(client: Client, queue: str) -> List[str]:
    ids = [f"m{i}" for i in range(50)]
    client.send_batch(queue, [NewMessage({"n": i}, id=id) for i, id in enumerate(ids)])
    return ids


def _s6_check(client: Client, queue: str, ids: List[str], started: Set[str],
              finished: Set[str], stopped_after_last_end: float) -> None:
    assert stopped_after_last_end < 2.0
    assert started == finished, "every started handler finished"
    acked = {id for id in ids if gone(client, queue, id)}
    assert acked == finished, "every finished handler was acked"
    stats = client.stats(queue)
    assert (stats.in_flight, stats.delayed, stats.ready) == (0, 0, 50 - len(acked))
    # Released, not held until their 60 s leases end: a receive gets them now.
    ready = client.receive(queue, max=100)
    assert sorted(d.id for d in ready) == sorted(set(ids) - acked)


def test_S6_graceful_stop_under_load(client: Client, queue: str) -> None:
    ids = _s6_load(client, queue)
    started: Set[str] = set()
    finished: Set[str] = set()
    last_end = [0.0]
    lock = threading.Lock()

    def handle(d: Delivery) -> None:
        with lock:
            started.add(d.id)
        time.sleep(0.1)
        with lock:
            finished.add(d.id)
            last_end[0] = time.monotonic()

    worker = Worker(client, queue, handle, concurrency=8, lease="60s", poll_wait="5s").start()
    try:
        wait_until(lambda: len(finished) >= 8 and len(started) > len(finished), 15,
                   "handlers under way, some done")
    finally:
        assert worker.stop(timeout="10s")
    returned = time.monotonic()
    assert len(finished) < 50, "stopped while there was work left"
    _s6_check(client, queue, ids, started, finished, returned - last_end[0])


def test_S6_graceful_stop_under_load_async(server: ServerProcess, client: Client,
                                           queue: str) -> None:
    ids = _s6_load(client, queue)
    started: Set[str] = set()
    finished: Set[str] = set()
    last_end = [0.0]

    async def main() -> float:
        async with AsyncClient(server.url) as aclient:
            async def handle(d: Delivery) -> None:
                started.add(d.id)
                await asyncio.sleep(0.1)
                finished.add(d.id)
                last_end[0] = time.monotonic()

            worker = AsyncWorker(aclient, queue, handle, concurrency=8, lease="60s",
                                 poll_wait="5s")
            task = asyncio.create_task(worker.run())
            deadline = time.monotonic() + 15
            while not (len(finished) >= 8 and len(started) > len(finished)):
                assert time.monotonic() < deadline, "handlers under way, some done"
                await asyncio.sleep(0.005)
            await asyncio.wait_for(worker.stop(), 10)
            returned = time.monotonic()
            await task
            return returned

    returned = asyncio.run(main())
    assert len(finished) < 50, "stopped while there was work left"
    _s6_check(client, queue, ids, started, finished, returned - last_end[0])


S8_ADMIN = "s8-admin-token-0123456789"


@pytest.fixture(scope="module")
def small_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(["--tokens", f"admin:{S8_ADMIN}", "--max-body-bytes", "65536"])
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_S8_bad_input_fails_with_the_apis_codes(small_server: ServerProcess,
                                                 queue: str) -> None:
    requests: List[httpx.Request] = []
    hooks: Dict[str, Any] = {"event_hooks": {"request": [requests.append]}}
    with Client(small_server.url, token=S8_ADMIN, http_options=hooks) as client:
        with pytest.raises(InvalidInputError) as bad_queue:
            client.send("no spaces allowed", 1)
        assert bad_queue.value.code == "invalid_queue_name"
        with pytest.raises(InvalidInputError) as bad_id:
            client.send(queue, 1, id="no spaces either")
        assert bad_id.value.code == "invalid_id"
        with pytest.raises(TooLargeError) as too_large:
            client.send(queue, "x" * 100_000)
        assert too_large.value.code in ("payload_too_large", "body_too_large")
        # An ambiguous bare number: refused by the client, before any request.
        before = len(requests)
        with pytest.raises(TypeError) as ambiguous:
            client.send(queue, 1, delay=2)  # type: ignore[arg-type]
        assert "timedelta(seconds=2)" in str(ambiguous.value) and "'2s'" in str(ambiguous.value)
        assert len(requests) == before
        with pytest.raises((InvalidInputError, LeaseLostError)) as receipt:
            client.ack(queue, "0" * 24 + "e" + "never-received")
        assert receipt.value.code in ("invalid_receipt", "lease_lost")
    with Client(small_server.url, token="not-the-token-0123456789") as stranger:
        with pytest.raises(UnauthorizedError) as refused:
            stranger.send(queue, 1)
        assert (refused.value.status, refused.value.code) == (401, "unauthorized")


class PaymentDeclined(Exception):
    """A typed error of the application."""


def charge(card: str, depth: int) -> None:
    """Fails deep in a call stack (frames alternate, so Python cannot fold them), so the
    error text must be cut to 4 KiB."""
    if depth == 0:
        raise PaymentDeclined(f"card {card} declined")
    settle(card, depth - 1)


def settle(card: str, depth: int) -> None:
    charge(card, depth)


def test_S9_a_handler_that_fails_is_loud(client: Client, queue: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="delayq.worker")
    client.send(queue, {"card": "4242"}, id="s9", max_attempts=1)
    failed: List[Tuple[Delivery, BaseException]] = []

    def handle(d: Delivery) -> None:
        charge(d.payload["card"], 40)

    worker = Worker(client, queue, handle, poll_wait="2s",
                    on_failed=lambda d, exc: failed.append((d, exc))).start()
    try:
        wait_until(lambda: failed, 10, "the failed hook")
        wait_until(lambda: client.dead_letters(queue).total == 1, 10, "the nack")
    finally:
        assert worker.stop(timeout="10s")
    [(delivery, exc)] = failed
    assert delivery.id == "s9" and isinstance(exc, PaymentDeclined)
    assert str(exc) == "card 4242 declined"
    # Logged, with its stack.
    [record] = [r for r in caplog.records if r.name == "delayq.worker" and r.exc_info]
    assert record.levelno == logging.ERROR and record.exc_info is not None
    assert record.exc_info[1] is exc and "s9" in record.getMessage()
    # The server keeps the error's type, message and stack, bounded to 4 KiB.
    [kept] = client.get(queue, "s9").errors
    lines = kept.error.splitlines()
    assert lines[0] == "PaymentDeclined: card 4242 declined"
    assert "Traceback (most recent call last):" in kept.error or "frames cut" in kept.error
    # The innermost frame, where it was raised, is kept (3.11+ may add a caret line).
    assert any('raise PaymentDeclined(f"card {card} declined")' in line for line in lines[-2:])
    sent = error_text(exc)
    assert len(sent.encode()) <= 4096 and len(sent.encode()) > 3500
    assert kept.error == sent, (
        f"the server kept {len(kept.error.encode())} of the {len(sent.encode())} bytes sent")
