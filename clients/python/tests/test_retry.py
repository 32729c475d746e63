"""Retries on 503, against a real outage: the server's own Redis is frozen (SIGSTOP), so
the server answers 503 ``unavailable`` after its --redis-timeout, until the test lets Redis
go on (SIGCONT) from inside the client's response hook, after a set number of 503s."""

from __future__ import annotations

import os
import signal
from datetime import timedelta
from typing import Callable, Dict, Iterator, List, Set

import httpx
import pytest

from delayq import Client, RetryPolicy, UnavailableError
from serverproc import ServerProcess


@pytest.fixture
def flaky() -> Iterator[ServerProcess]:
    proc = ServerProcess(["--redis-timeout", "500ms"]).start()
    try:
        yield proc
    finally:
        os.kill(proc.redis_pid(), signal.SIGCONT)
        proc.stop()


class Outage:
    """Freezes a server's Redis; thaws it once ``thaw_after`` 503s were answered."""

    def __init__(self, server: ServerProcess) -> None:
        self.redis = server.redis_pid()
        self.statuses: List[int] = []
        self.thaw_after = 0

    def freeze(self, thaw_after: int) -> None:
        self.statuses.clear()
        self.thaw_after = thaw_after
        os.kill(self.redis, signal.SIGSTOP)

    def on_response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)
        if self.thaw_after and self.statuses.count(503) == self.thaw_after:
            os.kill(self.redis, signal.SIGCONT)


def client_for(server: ServerProcess, outage: Outage) -> Client:
    hooks: Dict[str, List[Callable[[httpx.Response], None]]] = {
        "response": [outage.on_response]}
    http = httpx.Client(timeout=10.0, event_hooks=hooks)
    retry = RetryPolicy(retries=4, base_delay=timedelta(milliseconds=50))
    return Client(server.url, retry=retry, http_client=http)


def retried_through(statuses: List[int], n: int, success: Set[int]) -> bool:
    """The call got ``n`` 503s (more if Redis was slow to come back), then succeeded."""
    return statuses[:n] == [503] * n and set(statuses[n:-1]) <= {503} \
        and statuses[-1] in success


def test_idempotent_calls_are_retried_through_503s(flaky: ServerProcess, queue: str) -> None:
    outage = Outage(flaky)
    client = client_for(flaky, outage)
    client.send(queue, "x", id="known")

    outage.freeze(thaw_after=2)
    assert client.get(queue, "known").payload == "x"
    assert retried_through(outage.statuses, 2, {200})

    # A send with a caller id is safe to repeat: the first try may land once Redis goes
    # on, and the retry is then answered as its duplicate; either way one message.
    outage.freeze(thaw_after=1)
    sent = client.send(queue, "y", id="safe")
    assert sent.id == "safe" and retried_through(outage.statuses, 1, {200, 201})
    assert client.stats(queue).ready == 2


def test_other_calls_fail_at_once_with_unavailable(flaky: ServerProcess, queue: str) -> None:
    outage = Outage(flaky)
    client = client_for(flaky, outage)
    outage.freeze(thaw_after=0)
    try:
        with pytest.raises(UnavailableError) as err:
            client.send(queue, "no id: a repeat could write it twice")
        assert (err.value.status, err.value.code) == (503, "unavailable")
        assert outage.statuses == [503]
    finally:
        os.kill(outage.redis, signal.SIGCONT)
