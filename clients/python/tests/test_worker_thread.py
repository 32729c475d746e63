"""The thread-based worker against a real server: ack, retry, dead letter, lease extension,
graceful stop and SIGTERM."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any, Dict, List, Sequence, Tuple

import pytest

from delayq import (
    Client, Delivery, NotFoundError, PermanentFailure, RetryLater, SettleResult, Worker,
)
from serverproc import ServerProcess, wait_until


def gone(client: Client, queue: str, id: str) -> bool:
    try:
        client.get(queue, id)
        return False
    except NotFoundError:
        return True


class CountingClient(Client):
    """The real client, with the acks the worker makes on their own and with a receive
    counted."""

    def __init__(self, url: str) -> None:
        super().__init__(url, timeout="10s")
        self.acks_alone = 0
        self.acks_carried = 0

    def ack(self, queue: str, receipt: str) -> None:
        self.acks_alone += 1
        super().ack(queue, receipt)

    def ack_many(self, queue: str, receipts: Sequence[str]) -> List[SettleResult]:
        self.acks_alone += len(receipts)
        return super().ack_many(queue, receipts)

    def ack_and_receive(self, queue: str, receipts: Sequence[str], **kw: Any
                        ) -> Tuple[List[SettleResult], List[Delivery]]:
        self.acks_carried += len(receipts)
        return super().ack_and_receive(queue, receipts, **kw)


def test_a_worker_that_goes_on_acks_with_its_next_receive(server: ServerProcess,
                                                          client: Client, queue: str) -> None:
    client.send_batch(queue, [{"n": i} for i in range(5)])
    seen: List[int] = []
    with CountingClient(server.url) as counting:
        worker = Worker(counting, queue, lambda d: seen.append(d.payload["n"]), poll_wait="1s")
        worker.start()
        wait_until(lambda: len(seen) == 5 and client.stats(queue).in_flight == 0, 10,
                   "every message handled and acked")
        assert worker.stop(timeout="15s")
    assert sorted(seen) == list(range(5))
    # Every ack went with a receive; the stop may cut the long poll that carried the
    # last one, which is then sent again on its own (its fate was unknown).
    assert counting.acks_carried == 5 and counting.acks_alone <= 1


def test_handles_each_message_once_with_concurrency(client: Client, queue: str) -> None:
    ids = [f"m{i}" for i in range(8)]
    client.send_batch(queue, [{"n": i} for i in range(8)])
    seen: List[int] = []
    running, peak = [0], [0]
    lock = threading.Lock()

    def handle(d: Delivery) -> None:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.1)  # the work itself
        with lock:
            running[0] -= 1
            seen.append(d.payload["n"])

    worker = Worker(client, queue, handle, concurrency=4, poll_wait="500ms").start()
    try:
        wait_until(lambda: len(seen) == len(ids), 15, "every message handled")
        wait_until(lambda: client.stats(queue).in_flight == 0, 5, "every ack")
    finally:
        worker.stop(timeout="10s")
    assert sorted(seen) == list(range(8))
    assert 1 < peak[0] <= 4
    assert client.stats(queue).ready == 0


def test_a_failure_is_nacked_and_retried_after_retry_after(client: Client, queue: str) -> None:
    client.send(queue, "job", id="flaky")
    attempts: List[Tuple[int, float]] = []
    history: List[str] = []

    def handle(d: Delivery) -> None:
        attempts.append((d.attempt, time.monotonic()))
        if d.attempt == 1:
            raise RetryLater("downstream busy", retry_after="300ms")
        if d.attempt == 2:
            raise ValueError("boom")
        history.extend(e.error.splitlines()[0] for e in client.get(queue, "flaky").errors)

    worker = Worker(client, queue, handle, poll_wait="500ms", retry_after="100ms").start()
    try:
        wait_until(lambda: gone(client, queue, "flaky"), 15, "the third attempt's ack")
    finally:
        worker.stop(timeout="10s")
    assert [a for a, _ in attempts] == [1, 2, 3]
    # RetryLater's delay, then the worker's retry_after for a plain exception.
    assert attempts[1][1] - attempts[0][1] >= 0.25
    assert attempts[2][1] - attempts[1][1] >= 0.08
    assert history == ["RetryLater: downstream busy", "ValueError: boom"]


def test_a_permanent_failure_is_a_dead_letter_until_requeued(client: Client,
                                                             queue: str) -> None:
    client.send(queue, {"order": 7}, id="poison", max_attempts=10)
    calls: List[int] = []
    fixed = threading.Event()

    def handle(d: Delivery) -> None:
        calls.append(d.attempt)
        if not fixed.is_set():
            raise PermanentFailure("order 7 does not exist")

    worker = Worker(client, queue, handle, poll_wait="500ms").start()
    try:
        wait_until(lambda: client.dead_letters(queue).total == 1, 10, "the dead letter")
        dead = client.dead_letters(queue).items[0]
        assert (dead.id, dead.attempts) == ("poison", 1)
        assert dead.last_error is not None
        assert dead.last_error.splitlines()[0] == "PermanentFailure: order 7 does not exist"
        fixed.set()
        assert client.requeue_dead(queue, "poison") == 1
        wait_until(lambda: gone(client, queue, "poison"), 10, "the requeued message's ack")
    finally:
        worker.stop(timeout="10s")
    assert len(calls) == 2


def test_a_long_handler_keeps_its_lease_and_its_message(client: Client, queue: str) -> None:
    client.send(queue, "slow", id="slow")
    calls: List[str] = []
    started = threading.Event()

    def handle(d: Delivery) -> None:
        calls.append(d.receipt)
        started.set()
        time.sleep(3.5)  # more than two leases' worth of work

    worker = Worker(client, queue, handle, lease="1500ms", poll_wait="500ms").start()
    try:
        assert started.wait(10)
        # Meanwhile another consumer keeps asking: the message must never come its way.
        stolen: List[Delivery] = []
        while worker_busy(client, queue) and not stolen:
            stolen += client.receive(queue, wait="300ms", lease="30s")
        assert stolen == []
        wait_until(lambda: gone(client, queue, "slow"), 10, "the ack")
    finally:
        worker.stop(timeout="10s")
    assert len(calls) == 1


def worker_busy(client: Client, queue: str) -> bool:
    try:
        return client.get(queue, "slow").state == "in_flight"
    except NotFoundError:
        return False


def test_stop_releases_an_unfinished_message_for_another_consumer(client: Client,
                                                                  queue: str) -> None:
    client.send(queue, "long", id="long")
    started, let_go = threading.Event(), threading.Event()
    results: Dict[str, bool] = {}

    def handle(d: Delivery) -> None:
        started.set()
        results["finished"] = let_go.wait(20)

    worker = Worker(client, queue, handle, lease="60s", poll_wait="500ms", grace="300ms").start()
    try:
        assert started.wait(10)
        stop_at = time.monotonic()
        assert worker.stop(timeout="10s")
        [d] = client.receive(queue, wait="5s", lease="30s")
        # Released at the end of the grace period, not 60 s later when its lease ran out.
        assert d.id == "long" and time.monotonic() - stop_at < 5
    finally:
        let_go.set()
    wait_until(lambda: "finished" in results, 10, "the old handler to return")
    # The worker dropped its late result: the new holder's ack is the one that counts.
    client.ack(queue, d.receipt)


def test_stop_lets_a_handler_finish_within_grace(client: Client, queue: str) -> None:
    client.send(queue, "short", id="short")
    started = threading.Event()

    def handle(d: Delivery) -> None:
        started.set()
        time.sleep(0.5)

    worker = Worker(client, queue, handle, poll_wait="500ms", grace="10s").start()
    assert started.wait(10)
    assert worker.stop(timeout="15s")
    assert gone(client, queue, "short")


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers need the main thread")
def test_sigterm_stops_a_worker_run_in_the_main_thread(client: Client, queue: str) -> None:
    handled = threading.Event()
    worker = Worker(client, queue, lambda d: handled.set(), poll_wait="500ms", grace="5s")

    def send_then_terminate() -> None:
        client.send(queue, "x", id="sig")
        if handled.wait(10):
            os.kill(os.getpid(), signal.SIGTERM)

    previous = signal.getsignal(signal.SIGTERM)
    threading.Thread(target=send_then_terminate, daemon=True).start()
    worker.run(handle_signals=True)
    assert worker.stopped and handled.is_set()
    assert signal.getsignal(signal.SIGTERM) is previous
    assert gone(client, queue, "sig")
