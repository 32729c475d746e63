"""The duration and time rule (README, "Durations and times"): a timedelta or text with units
for a duration, an aware datetime or RFC 3339 text for a time; every bare number, naive
datetime and unreadable text refused by the client itself, before any request, with a
message naming the fix; every accepted form reaching the server as the right milliseconds.
The client's text parser is checked against the server's on a corpus of odd inputs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional

import httpx
import pytest

from delayq import (
    AsyncWorker, Backoff, Client, InvalidInputError, RetryLater, RetryPolicy, Worker,
    parse_duration, verify_push,
)
from serverproc import ServerProcess


class Recorder:
    """A client whose every request is kept (method, path, JSON body)."""

    def __init__(self, url: str) -> None:
        self.requests: List[httpx.Request] = []
        self.client = Client(url, http_options={"event_hooks": {"request": [self.keep]}})

    def keep(self, request: httpx.Request) -> None:
        self.requests.append(request)

    def last_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = json.loads(self.requests[-1].content)
        return body


@pytest.fixture
def rec(server: ServerProcess) -> Iterator[Recorder]:
    recorder = Recorder(server.url)
    with recorder.client:
        yield recorder


# Every place a duration is taken, as a call that gives it `value`.
PLACES: Dict[str, Callable[[Client, str, Any], Any]] = {
    "send delay": lambda c, q, v: c.send(q, 1, delay=v),
    "send ttl": lambda c, q, v: c.send(q, 1, ttl=v),
    "send max_wait": lambda c, q, v: c.send(q, 1, id="x", on_duplicate="debounce", max_wait=v),
    "send handler_timeout": lambda c, q, v: c.send(q, 1, handler_timeout=v),
    "send replicas_timeout": lambda c, q, v: c.send(q, 1, replicas=0, replicas_timeout=v),
    "receive lease": lambda c, q, v: c.receive(q, lease=v),
    "receive wait": lambda c, q, v: c.receive(q, wait=v),
    "receive_many wait": lambda c, q, v: c.receive_many(queues=[q], wait=v),
    "extend lease": lambda c, q, v: c.extend(q, "0" * 24 + "e" + "x", lease=v),
    "nack retry_after": lambda c, q, v: c.nack(q, "0" * 24 + "e" + "x", retry_after=v),
    "reschedule delay": lambda c, q, v: c.reschedule(q, "x", delay=v),
    "backoff fixed": lambda c, q, v: Backoff.fixed(v),
    "backoff steps": lambda c, q, v: Backoff.steps(["1s", v]),
    "configure default_ttl": lambda c, q, v: c.configure(q, default_ttl=v),
    "configure idempotency_window": lambda c, q, v: c.configure(q, idempotency_window=v),
    "schedule every": lambda c, q, v: c.put_schedule(q, "s", 1, every=v),
    "schedule jitter": lambda c, q, v: c.put_schedule(q, "s", 1, every="1m", jitter=v),
    "push timeout": lambda c, q, v: c.set_push_target(q, "https://example.com", timeout=v),
    "events wait": lambda c, q, v: c.events(q, wait=v),
    "RetryLater": lambda c, q, v: RetryLater("busy", retry_after=v),
    "RetryPolicy": lambda c, q, v: RetryPolicy(base_delay=v),
    "Client timeout": lambda c, q, v: Client(timeout=v),
    "Worker lease": lambda c, q, v: Worker(c, q, print, lease=v),
    "Worker poll_wait": lambda c, q, v: Worker(c, q, print, poll_wait=v),
    "AsyncWorker handler_timeout": lambda c, q, v: AsyncWorker(
        None, q, None, handler_timeout=v),  # type: ignore[arg-type]
    "verify_push tolerance": lambda c, q, v: verify_push({}, b"", "key", v),
}


@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("number", [2, 2.5, 0])
def test_a_bare_number_is_refused_with_the_fix_before_any_request(
        rec: Recorder, queue: str, place: str, number: Any) -> None:
    with pytest.raises(TypeError) as refused:
        PLACES[place](rec.client, queue, number)
    message = str(refused.value)
    assert f"timedelta(seconds={number!r})" in message and f"'{number!r}s'" in message
    assert rec.requests == []


@pytest.mark.parametrize("place", sorted(PLACES))
def test_a_bool_is_not_a_duration_either(rec: Recorder, queue: str, place: str) -> None:
    with pytest.raises(TypeError, match="True is not a duration"):
        PLACES[place](rec.client, queue, True)
    assert rec.requests == []


@pytest.mark.parametrize("text", ["2", "1.5", "soon", "5 s x", "-5s", "1.s", "", "2 parsecs"])
@pytest.mark.parametrize("place", ["send delay", "receive wait", "Worker lease",
                                   "configure idempotency_window", "schedule every"])
def test_text_that_is_not_a_duration_is_refused_before_any_request(
        rec: Recorder, queue: str, place: str, text: str) -> None:
    with pytest.raises(ValueError) as refused:
        PLACES[place](rec.client, queue, text)
    assert "is not a duration" in str(refused.value) and "'2s'" in str(refused.value)
    assert rec.requests == []


def test_a_negative_timedelta_is_refused(rec: Recorder, queue: str) -> None:
    with pytest.raises(ValueError, match="negative"):
        rec.client.send(queue, 1, delay=timedelta(seconds=-1))
    assert rec.requests == []


ACCEPTED = [
    (timedelta(seconds=2), 2_000),
    (timedelta(milliseconds=1), 1),
    (timedelta(0), 0),
    ("250ms", 250),
    ("2s", 2_000),
    ("1m30s", 90_000),
    ("15m", 900_000),
    ("1h 30m", 5_400_000),
    ("1.5s", 1_500),
    ("7d", 604_800_000),
    ("0", 0),
]


@pytest.mark.parametrize("value, ms", ACCEPTED)
def test_an_accepted_duration_reaches_the_server_as_the_right_ms(
        rec: Recorder, queue: str, value: Any, ms: int) -> None:
    stats = rec.client.configure(queue, idempotency_window=value)
    assert stats.raw["idempotency_window_ms"] == ms
    # On the wire: a timedelta as whole milliseconds, text as written.
    sent = rec.last_json()["idempotency_window"]
    assert sent == (value if isinstance(value, str) else ms)


def test_durations_reach_a_delivery_and_a_schedule_as_the_right_ms(
        client: Client, queue: str) -> None:
    client.send(queue, 1, handler_timeout="1m30s", ttl=timedelta(minutes=5))
    [d] = client.receive(queue, wait="2s")
    assert d.handler_timeout_ms == 90_000
    assert d.raw["expires_at_ms"] - d.due_ms == 300_000
    client.ack(queue, d.receipt)
    s = client.put_schedule(queue, "grid", 1, every=timedelta(minutes=10), jitter="2.5s")
    assert (s.every_ms, s.jitter_ms) == (600_000, 2_500)
    client.delete_schedule(queue, "grid")


# Text the two parsers must read alike: each either a duration (the same milliseconds) or
# not one. Odd spacing, fractions, long unit names, and what humantime refuses.
CORPUS = ["0", "00", "1ms", "1 ms", "1s 500ms", "1s500ms", "1.5s", "1.5h", "1.25m",
          "2 hours", "1min", "3 mins", "1hr 5min", "1M", "1w", "1d", "1 2s", "1500us",
          "999us", "1.0001h", "1..5s", "1.s", "s", "", " ", "1", "1s 2", "1S", "5µs",
          "1e3ms", "+1s", "-1s", "1_000ms", "٣s", "1sec", "2 seconds", "1 y", "12 months",
          "1.5", "1 h 30 m", "1h30", "0.5ms", "0.0005s", "1ns"]


@pytest.mark.parametrize("text", CORPUS)
def test_the_clients_parser_reads_text_as_the_server_does(server: ServerProcess, queue: str,
                                                         text: str) -> None:
    # The server's verdict, asked directly (the client would check the text first).
    answer = httpx.patch(f"{server.url}/v1/queues/{queue}", timeout=10,
                         json={"idempotency_window": text})
    server_ms: Optional[int] = None
    if answer.status_code == 200:
        server_ms = answer.json()["idempotency_window_ms"]
    else:
        assert answer.json()["error"]["code"] == "invalid_duration", answer.text
    try:
        client_ms: Optional[int] = parse_duration(text) // timedelta(milliseconds=1)
    except ValueError:
        client_ms = None
    assert client_ms == server_ms


UTC = timezone.utc


@pytest.mark.parametrize("value, due_ms", [
    (datetime(2030, 1, 1, 10, tzinfo=UTC), 1_893_492_000_000),
    (datetime(2030, 1, 1, 15, 45, 0, 500_000, tzinfo=timezone(timedelta(hours=5, minutes=45))),
     1_893_492_000_500),
    ("2030-01-01T10:00:00Z", 1_893_492_000_000),
    ("2030-01-01T15:45:00.5+05:45", 1_893_492_000_500),
    ("2030-01-01 10:00:00.000999z", 1_893_492_000_000),
])
def test_an_accepted_time_reaches_the_server_as_the_right_ms(
        client: Client, queue: str, value: Any, due_ms: int) -> None:
    assert client.send(queue, 1, deliver_at=value).due_ms == due_ms


@pytest.mark.parametrize("value, error, words", [
    (1_893_492_000, TypeError, "aware datetime"),
    (1_893_492_000.5, TypeError, "aware datetime"),
    (datetime(2030, 1, 1, 10), ValueError, "naive"),
    ("2030-01-01T10:00:00", ValueError, "offset"),
    ("2030-13-01T10:00:00Z", ValueError, "RFC 3339"),
    ("tomorrow", ValueError, "RFC 3339"),
    ("1969-12-31T23:59:59Z", ValueError, "before 1970"),
])
def test_a_time_that_is_ambiguous_or_unreadable_is_refused_before_any_request(
        rec: Recorder, queue: str, value: Any, error: type, words: str) -> None:
    for call in (lambda: rec.client.send(queue, 1, deliver_at=value),
                 lambda: rec.client.send(queue, 1, expires_at=value),
                 lambda: rec.client.reschedule(queue, "x", deliver_at=value),
                 lambda: rec.client.backfill_schedule(queue, "s", from_=value, to=value)):
        with pytest.raises(error) as refused:
            call()
        assert words in str(refused.value)
    assert rec.requests == []


def test_a_server_refusal_is_still_a_typed_error(client: Client, queue: str) -> None:
    # Text the client reads as a duration but the server's limits refuse.
    with pytest.raises(InvalidInputError) as err:
        client.receive(queue, wait="10m")
    assert err.value.code == "over_limit"
