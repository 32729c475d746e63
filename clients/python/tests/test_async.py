"""The asyncio client and worker against a real server. Each test runs its own event loop
with ``asyncio.run``, so no pytest plugin is needed."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Awaitable, Callable, List, Sequence, Tuple, TypeVar

import httpx

from delayq import (
    AsyncClient, AsyncWorker, Delivery, LeaseLostError, NotFoundError, PermanentFailure,
    RetryLater, SettleResult,
)
from serverproc import ServerProcess

T = TypeVar("T")


async def eventually(check: Callable[[], Awaitable[T]], timeout: float, what: str) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = await check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.02)


async def gone(client: AsyncClient, queue: str, id: str) -> bool:
    try:
        await client.get(queue, id)
        return False
    except NotFoundError:
        return True


def test_async_send_receive_ack(server: ServerProcess, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as client:
            sent = await client.send(queue, b"\x00bytes", id="a1", delay="200ms")
            assert not sent.duplicate
            assert await client.receive(queue) == []
            [d] = await client.receive(queue, wait="3s")
            assert (d.id, d.payload) == ("a1", b"\x00bytes")
            await client.ack(queue, d.receipt)
            try:
                await client.ack(queue, d.receipt)
                raise AssertionError("a second ack must fail")
            except LeaseLostError as err:
                assert err.code == "lease_lost"
            assert await gone(client, queue, "a1")
            assert (await client.stats(queue)).in_flight == 0
            # An ack that goes with the next receive.
            await client.send(queue, "b")
            [b] = await client.receive(queue)
            acked, got = await client.ack_and_receive(queue, [b.receipt], wait="200ms")
            assert [a.ok for a in acked] == [True] and got == []
            assert (await client.stats(queue)).in_flight == 0

    asyncio.run(main())


def test_async_worker_acks_retries_and_dead_letters(server: ServerProcess, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as client:
            await client.send_batch(queue, ["ok", "retry", "poison"])
            seen: List[Tuple[object, int]] = []

            async def handle(d: Delivery) -> None:
                seen.append((d.payload, d.attempt))
                if d.payload == "retry" and d.attempt == 1:
                    raise RetryLater("later", retry_after="200ms")
                if d.payload == "poison":
                    raise PermanentFailure("never")

            worker = AsyncWorker(client, queue, handle, concurrency=3, poll_wait="500ms")
            task = asyncio.create_task(worker.run())
            await eventually(lambda: dead_count(client, queue, 1), 10, "the dead letter")
            await eventually(lambda: drained(client, queue), 10, "ok and retry acked")
            await worker.stop()
            await task
            assert sorted(seen) == [("ok", 1), ("poison", 1), ("retry", 1), ("retry", 2)]

    asyncio.run(main())


class CountingClient(AsyncClient):
    """The real client, with the acks the worker makes on their own and with a receive
    counted."""

    acks_alone = 0
    acks_carried = 0

    async def ack(self, queue: str, receipt: str) -> None:
        self.acks_alone += 1
        await super().ack(queue, receipt)

    async def ack_many(self, queue: str, receipts: Sequence[str]) -> List[SettleResult]:
        self.acks_alone += len(receipts)
        return await super().ack_many(queue, receipts)

    async def ack_and_receive(self, queue: str, receipts: Sequence[str], **kw: Any
                              ) -> Tuple[List[SettleResult], List[Delivery]]:
        self.acks_carried += len(receipts)
        return await super().ack_and_receive(queue, receipts, **kw)


def test_async_worker_that_goes_on_acks_with_its_next_receive(server: ServerProcess,
                                                              queue: str) -> None:
    async def main() -> None:
        async with CountingClient(server.url) as client:
            await client.send_batch(queue, [{"n": i} for i in range(5)])
            seen: List[int] = []

            async def handle(d: Delivery) -> None:
                seen.append(d.payload["n"])

            worker = AsyncWorker(client, queue, handle, poll_wait="1s")
            task = asyncio.create_task(worker.run())
            await eventually(lambda: drained(client, queue), 10, "every message acked")
            await worker.stop()
            await task
            assert sorted(seen) == list(range(5))
            # Every ack went with a receive; the stop may cut the long poll that carried the
            # last one, which is then sent again on its own (its fate was unknown).
            assert client.acks_carried == 5 and client.acks_alone <= 1

    asyncio.run(main())


async def dead_count(client: AsyncClient, queue: str, n: int) -> bool:
    return (await client.dead_letters(queue)).total == n


async def drained(client: AsyncClient, queue: str) -> bool:
    s = await client.stats(queue)
    return s.ready == 0 and s.in_flight == 0 and s.delayed == 0


def test_async_worker_extends_a_long_handlers_lease(server: ServerProcess, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as client:
            await client.send(queue, "slow", id="slow")
            calls: List[int] = []
            started = asyncio.Event()

            async def handle(d: Delivery) -> None:
                calls.append(d.attempt)
                started.set()
                await asyncio.sleep(3.5)  # more than two leases of work

            worker = AsyncWorker(client, queue, handle, lease="1500ms", poll_wait="500ms")
            task = asyncio.create_task(worker.run())
            await asyncio.wait_for(started.wait(), 10)
            stolen: List[Delivery] = []
            while not await gone(client, queue, "slow") and not stolen:
                stolen += await client.receive(queue, wait="300ms", lease="30s")
            await worker.stop()
            await task
            assert stolen == [] and calls == [1]

    asyncio.run(main())


def test_async_stop_releases_and_cancels_an_unfinished_handler(server: ServerProcess,
                                                               queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as client:
            await client.send(queue, "long", id="long")
            started, cancelled = asyncio.Event(), asyncio.Event()

            async def handle(d: Delivery) -> None:
                started.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    cancelled.set()
                    raise

            worker = AsyncWorker(client, queue, handle, lease="60s", poll_wait="500ms",
                                 grace="300ms")
            task = asyncio.create_task(worker.run())
            await asyncio.wait_for(started.wait(), 10)
            stop_at = time.monotonic()
            await asyncio.wait_for(worker.stop(), 10)
            await task
            assert cancelled.is_set()
            [d] = await client.receive(queue, wait="5s")
            assert d.id == "long" and time.monotonic() - stop_at < 5
            await client.ack(queue, d.receipt)

    asyncio.run(main())


def test_async_handler_timeout_fails_the_attempt(server: ServerProcess, queue: str) -> None:
    async def main() -> None:
        async with AsyncClient(server.url) as client:
            # The message's own handler_timeout wins over the worker's (none here).
            await client.send(queue, "x", id="hang", handler_timeout="300ms", max_attempts=1)

            async def handle(d: Delivery) -> None:
                await asyncio.sleep(30)

            worker = AsyncWorker(client, queue, handle, poll_wait="500ms")
            task = asyncio.create_task(worker.run())
            await eventually(lambda: dead_count(client, queue, 1), 10, "the timed-out attempt")
            await worker.stop()
            await task
            dead = (await client.dead_letters(queue)).items[0]
            assert dead.last_error is not None and "timed out" in dead.last_error

    asyncio.run(main())


class CutExtends(httpx.AsyncBaseTransport):
    """A real connection to the server, except that once ``cut``, extends get no answer (a
    network that drops them): each hangs until its caller gives up."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.cut = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.cut and request.url.path.endswith("/extend"):
            await asyncio.sleep(30)
            raise httpx.ReadTimeout("no answer", request=request)
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_async_worker_cancels_a_handler_well_before_an_unrenewed_lease_ends(
        server: ServerProcess, queue: str) -> None:
    # Cancelling only once an extend fails would leave the handler running after the server
    # handed the message to another consumer, the moment the lease ended; the worker keeps a
    # margin of a fifth of the lease.
    async def main() -> None:
        transport = CutExtends()
        async with AsyncClient(server.url,
                               http_client=httpx.AsyncClient(transport=transport)) as client:
            await client.send(queue, "x", id="m1")
            started, cancelled = asyncio.Event(), asyncio.Event()
            times: List[float] = []

            async def handle(d: Delivery) -> None:
                times.append(time.monotonic())
                started.set()
                try:
                    await asyncio.sleep(60)
                except asyncio.CancelledError:
                    times.append(time.monotonic())
                    cancelled.set()
                    raise

            worker = AsyncWorker(client, queue, handle, lease="1500ms", poll_wait="500ms")
            task = asyncio.create_task(worker.run())
            await asyncio.wait_for(started.wait(), 10)
            transport.cut = True
            await asyncio.wait_for(cancelled.wait(), 10)
            transport.cut = False
            ran = times[1] - times[0]
            assert ran <= 1.5 - 0.15, \
                f"the handler ran {ran:.3f}s of its 1.5s lease unrenewed before it was cancelled"
            await worker.stop()
            await task

    asyncio.run(main())
