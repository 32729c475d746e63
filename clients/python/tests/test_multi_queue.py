"""Workers over several queues: strict order (the first queue whenever it has something
due) and weights, with each delivery settled at the queue it came from (an ack drains it
there, a failure dead-letters it there)."""

from __future__ import annotations

import asyncio
import uuid
from typing import List, Tuple

import pytest

from delayq import AsyncClient, AsyncWorker, Client, Delivery, Worker
from serverproc import ServerProcess, wait_until


@pytest.fixture
def other() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def drained(client: Client, *queues: str) -> bool:
    return all(s.ready + s.delayed + s.in_flight == 0
               for s in (client.stats(q) for q in queues))


def test_strict_order_serves_the_first_queue_first_and_settles_each_at_its_own(
        client: Client, queue: str, other: str) -> None:
    # Sent to the second queue first: strict order still serves the first before it.
    client.send_batch(other, [{"n": n} for n in range(3)])
    client.send_batch(queue, [{"n": n} for n in range(3)])
    client.send(other, "poison", id="bad", max_attempts=1)
    handled: List[Tuple[str, object]] = []

    def handle(d: Delivery) -> None:
        handled.append((d.queue, d.payload))
        if d.payload == "poison":
            raise ValueError("cannot")

    worker = Worker(client, [queue, other], handle, poll_wait="1s").start()
    try:
        wait_until(lambda: len(handled) == 7 and drained(client, queue, other), 15,
                   "all seven handled and settled")
    finally:
        assert worker.stop(timeout="10s")
    assert [q for q, _ in handled[:3]] == [queue] * 3
    assert {q for q, _ in handled[3:]} == {other}
    assert client.dead_letters(other).total == 1 and client.dead_letters(queue).total == 0
    assert client.dead_letters(other).items[0].id == "bad"


def test_weighted_queues_are_all_served_and_settled(client: Client, queue: str,
                                                    other: str) -> None:
    client.send_batch(queue, [{"n": n} for n in range(6)])
    client.send_batch(other, [{"n": n} for n in range(2)])
    handled: List[str] = []
    worker = Worker(client, {queue: 3, other: 1}, lambda d: handled.append(d.queue),
                    concurrency=3, poll_wait="1s").start()
    try:
        wait_until(lambda: len(handled) == 8 and drained(client, queue, other), 15,
                   "all eight handled and acked")
    finally:
        assert worker.stop(timeout="10s")
    assert sorted(handled) == sorted([queue] * 6 + [other] * 2)


def test_a_queue_named_twice_or_a_bad_weight_is_refused(client: Client, queue: str) -> None:
    with pytest.raises(ValueError):
        Worker(client, [queue, queue], print)
    with pytest.raises(ValueError):
        Worker(client, {queue: 0}, print)
    with pytest.raises(ValueError):
        Worker(client, [], print)


def test_async_worker_over_weighted_queues(server: ServerProcess, client: Client, queue: str,
                                           other: str) -> None:
    client.send_batch(queue, ["a1", "a2"])
    client.send(other, "b1", max_attempts=1)

    async def main() -> List[Tuple[str, object]]:
        handled: List[Tuple[str, object]] = []
        async with AsyncClient(server.url) as aclient:
            async def handle(d: Delivery) -> None:
                handled.append((d.queue, d.payload))
                if d.payload == "b1":
                    raise ValueError("b1 fails")

            worker = AsyncWorker(aclient, {queue: 2, other: 1}, handle, concurrency=2,
                                 poll_wait="1s")
            task = asyncio.create_task(worker.run())
            for _ in range(500):
                if len(handled) == 3 and (await aclient.dead_letters(other)).total == 1:
                    break
                await asyncio.sleep(0.02)
            await worker.stop()
            await task
        return handled

    handled = asyncio.run(main())
    assert sorted(handled) == sorted([(queue, "a1"), (queue, "a2"), (other, "b1")])
    assert drained(client, queue) and client.dead_letters(other).total == 1
