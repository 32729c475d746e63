"""The server's errors arrive as typed exceptions with their status and stable code."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Dict

import pytest

from delayq import (
    Client, ConflictError, DelayqError, InvalidInputError, LeaseLostError, NotFoundError,
    RetryPolicy, TransportError, WrongStateError,
)
from serverproc import free_port


def test_a_bad_queue_name_is_invalid_input(client: Client) -> None:
    with pytest.raises(InvalidInputError) as err:
        client.send("bad!name", {"x": 1})
    assert (err.value.status, err.value.code) == (400, "invalid_queue_name")
    assert "bad!name" in err.value.message


def test_an_unknown_id_is_not_found(client: Client, queue: str) -> None:
    with pytest.raises(NotFoundError) as err:
        client.get(queue, "no-such-id")
    assert (err.value.status, err.value.code) == (404, "not_found")
    with pytest.raises(NotFoundError):
        client.requeue_dead(queue, "no-such-id")


def test_a_lost_lease_is_lease_lost(client: Client, queue: str) -> None:
    client.send(queue, "x")
    [d] = client.receive(queue, wait="2s")
    client.ack(queue, d.receipt)
    with pytest.raises(LeaseLostError) as err:
        client.ack(queue, d.receipt)
    assert (err.value.status, err.value.code) == (409, "lease_lost")
    assert isinstance(err.value, ConflictError)
    [result] = client.extend_many(queue, [d.receipt])
    assert not result.ok


def test_cancelling_a_message_in_flight_is_wrong_state(client: Client, queue: str) -> None:
    client.send(queue, "x", id="busy")
    client.receive(queue, wait="2s")
    with pytest.raises(WrongStateError) as err:
        client.cancel(queue, "busy")
    assert err.value.code == "wrong_state"


@pytest.mark.parametrize("kwargs, code", [
    ({"delay": "1s", "deliver_at": datetime(2033, 5, 18, tzinfo=timezone.utc)},
     "invalid_schedule"),
    ({"id": "bad id!"}, "invalid_id"),
    ({"priority": 10}, "invalid_option"),
])
def test_bad_options_name_their_code(client: Client, queue: str, kwargs: Dict[str, Any],
                                     code: str) -> None:
    with pytest.raises(InvalidInputError) as err:
        client.send(queue, 1, **kwargs)
    assert err.value.code == code


def test_no_server_is_a_transport_error() -> None:
    # A refused connection is retried whatever the call (nothing reached a server), then
    # reported.
    retry = RetryPolicy(retries=2, base_delay="10ms")
    with Client(f"http://127.0.0.1:{free_port()}", timeout="2s", retry=retry) as c:
        with pytest.raises(TransportError) as err:
            c.stats("q")
    assert isinstance(err.value, DelayqError) and err.value.status == 0
