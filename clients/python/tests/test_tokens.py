"""Token roles: a server started with tokens refuses calls a token's role does not allow,
and the client says so with a typed error."""

from __future__ import annotations

from typing import Iterator

import pytest

from delayq import Client, ForbiddenError, UnauthorizedError
from serverproc import ServerProcess

SEND = "send-token-0123456789"
CONSUME = "consume-token-0123456789"
ADMIN = "admin-token-0123456789"


@pytest.fixture(scope="module")
def secured() -> Iterator[ServerProcess]:
    proc = ServerProcess(["--tokens", f"send:{SEND},consume:{CONSUME},admin:{ADMIN}"])
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()


def test_each_role_does_its_part_and_no_more(secured: ServerProcess, queue: str) -> None:
    with Client(secured.url, token=SEND) as producer, \
            Client(secured.url, token=CONSUME) as consumer, \
            Client(secured.url, token=ADMIN) as admin:
        producer.send(queue, "x", id="m")
        with pytest.raises(ForbiddenError) as err:
            producer.receive(queue)
        assert (err.value.status, err.value.code) == (403, "forbidden")
        with pytest.raises(ForbiddenError):
            consumer.send(queue, "y")
        with pytest.raises(ForbiddenError):
            consumer.stats(queue)
        [d] = consumer.receive(queue, wait="2s")
        consumer.ack(queue, d.receipt)
        # Admin may do everything.
        assert admin.stats(queue).ready == 0
        admin.send(queue, "z")


def test_a_missing_or_unknown_token_is_unauthorized(secured: ServerProcess,
                                                     queue: str) -> None:
    for token in (None, "not-a-token-at-all-0000"):
        with Client(secured.url, token=token) as anonymous:
            with pytest.raises(UnauthorizedError) as err:
                anonymous.send(queue, "x")
            assert (err.value.status, err.value.code) == (401, "unauthorized")
    # The probe needs no token.
    with Client(secured.url) as anonymous:
        assert anonymous.health()
