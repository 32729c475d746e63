"""A queue's events through the client: a page from the oldest, filtered by kind and id,
paged by cursor, a long-polled page woken by a new event, and ``follow_events`` (sync and
async) going on from a cursor."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import List

import pytest

from delayq import AsyncClient, Client, InvalidInputError
from serverproc import ServerProcess


def test_pages_filters_and_cursors(client: Client, queue: str) -> None:
    client.configure(queue, events=True)
    client.send(queue, {"x": 1}, id="e1")
    [d] = client.receive(queue, wait="2s")
    client.ack(queue, d.receipt)

    page = client.events(queue, from_="oldest")
    assert [(e.kind, e.id) for e in page.events] == [
        ("sent", "e1"), ("delivered", "e1"), ("acked", "e1")]
    delivered = page.events[1]
    assert delivered.attempt == 1 and delivered.at_ms > 0 and delivered.cursor
    assert page.cursor == page.events[-1].cursor

    assert [e.kind for e in client.events(queue, from_="oldest", kinds=["acked"]).events] == [
        "acked"]
    first = client.events(queue, from_="oldest", id="e1", limit=2)
    assert [e.kind for e in first.events] == ["sent", "delivered"]
    rest = client.events(queue, from_=first.cursor, id="e1")
    assert [e.kind for e in rest.events] == ["acked"]
    assert client.events(queue, from_="now").events == []

    with pytest.raises(InvalidInputError) as bad:
        client.events(queue, from_="not-a-cursor")
    assert bad.value.code == "invalid_cursor"


def test_a_waiting_page_is_answered_by_the_next_event(client: Client, queue: str) -> None:
    client.configure(queue, events=True)
    cursor = client.events(queue, from_="now").cursor
    later = threading.Timer(0.3, lambda: client.send(queue, "late", id="e-late"))
    later.start()
    started = time.monotonic()
    try:
        page = client.events(queue, from_=cursor, wait="10s")
    finally:
        later.join()
    # Woken by the send, not by the end of the wait.
    assert [(e.kind, e.id) for e in page.events] == [("sent", "e-late")]
    assert time.monotonic() - started < 9


def test_follow_events_goes_on_from_a_cursor(client: Client, queue: str) -> None:
    client.configure(queue, events=True)
    cursor = client.events(queue, from_="now").cursor
    for n in range(3):
        client.send(queue, n, id=f"f{n}")
    follower = client.follow_events(queue, from_=cursor, kinds=["sent"], wait="2s")
    try:
        assert [next(follower).id for _ in range(3)] == ["f0", "f1", "f2"]
        later = threading.Timer(0.2, lambda: client.send(queue, 3, id="f3"))
        later.start()
        assert next(follower).id == "f3"  # one that happened while it waited
        later.join()
    finally:
        follower.close()


def test_follow_events_async(server: ServerProcess, queue: str) -> None:
    async def main() -> List[str]:
        async with AsyncClient(server.url) as client:
            await client.configure(queue, events=True)
            cursor = (await client.events(queue, from_="now")).cursor
            for n in range(2):
                await client.send(queue, n, id=f"a{n}")
            seen: List[str] = []
            async for event in client.follow_events(queue, from_=cursor, kinds=["sent"],
                                                    wait="2s"):
                seen.append(event.id)
                if len(seen) == 2:
                    break
            return seen

    assert asyncio.run(asyncio.wait_for(main(), 20)) == ["a0", "a1"]
