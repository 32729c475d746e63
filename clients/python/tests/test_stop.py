"""A stop is prompt: an idle worker, waiting in a long poll of 20 s, stops within a second
(its poll is cut, not waited out), having made one request while idle, not one a second.
Both workers. (S6, in test_scenarios.py, is the stop under load.)"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from typing import Any, List

from delayq import AsyncClient, AsyncWorker, Client, Delivery, Worker
from delayq._pollcut import PollLine
from serverproc import ServerProcess


class CountingReceives(Client):
    """The real client, counting the receives it makes."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.receives = 0
        self.polling = threading.Event()

    def receive(self, queue: str, **kw: Any) -> List[Delivery]:
        self.receives += 1
        self.polling.set()
        return super().receive(queue, **kw)


def test_an_idle_thread_worker_stops_within_a_second(server: ServerProcess,
                                                     queue: str) -> None:
    with CountingReceives(server.url) as client:
        worker = Worker(client, queue, lambda d: None, poll_wait="20s").start()
        assert client.polling.wait(10)
        time.sleep(1.5)  # idle: the period whose requests are counted
        stop_at = time.monotonic()
        assert worker.stop(timeout="10s")
        took = time.monotonic() - stop_at
        assert took < 1.0, f"stop took {took:.2f}s"
        assert client.receives == 1
        # The client goes on working after its worker stopped.
        client.send(queue, "after")
        assert [d.payload for d in client.receive(queue, wait="2s")] == ["after"]


class CountingAsyncReceives(AsyncClient):
    """The real async client, counting the receives it makes."""

    receives = 0

    async def receive(self, queue: str, **kw: Any) -> List[Delivery]:
        self.receives += 1
        return await super().receive(queue, **kw)


def test_an_idle_async_worker_stops_within_a_second(server: ServerProcess,
                                                    queue: str) -> None:
    async def main() -> None:
        async with CountingAsyncReceives(server.url) as client:
            async def handle(d: Delivery) -> None:
                pass

            worker = AsyncWorker(client, queue, handle, poll_wait="20s")
            task = asyncio.create_task(worker.run())
            while client.receives == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(1.5)  # idle: the period whose requests are counted
            stop_at = time.monotonic()
            await asyncio.wait_for(worker.stop(), 10)
            took = time.monotonic() - stop_at
            await task
            assert took < 1.0, f"stop took {took:.2f}s"
            assert client.receives == 1
            await client.send(queue, "after")
            assert [d.payload for d in await client.receive(queue, wait="2s")] == ["after"]

    asyncio.run(main())


def test_a_message_arriving_as_the_stop_begins_is_released_not_held(
        server: ServerProcess, queue: str) -> None:
    with CountingReceives(server.url) as client:
        worker = Worker(client, queue, lambda d: time.sleep(0.2), lease="60s",
                        poll_wait="20s").start()
        assert client.polling.wait(10)
        client.send(queue, "racing", id="race")  # answers the long poll as the stop begins
        assert worker.stop(timeout="10s")
        stats = client.stats(queue)
        # Handled and acked, or handed back at once: never held under its 60 s lease.
        assert stats.in_flight == 0 and stats.ready in (0, 1)


def test_a_poll_line_sees_an_answer_waiting_and_cuts_its_connection() -> None:
    """The mechanism under both workers' stop, on a socket pair standing in for the poll's
    connection: an answer waiting unread is seen (so it is read, not cut), and a cut ends
    the connection at once."""
    ours, server_end = socket.socketpair()
    with ours, server_end:
        class Stream:
            def get_extra_info(self, name: str) -> Any:
                return ours if name == "socket" else None

        line = PollLine(http=object())
        assert line.extensions is not None
        line.extensions["trace"]("connection.connect_tcp.complete", {"return_value": Stream()})
        assert not line.answering()
        server_end.sendall(b"HTTP/1.1 200 OK\r\n")
        assert line.answering()
        ours.recv(100)
        assert not line.answering()
        line.cut()
        assert server_end.recv(10) == b""  # the server sees its client gone
        assert line.cut_done
