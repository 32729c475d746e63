"""Recurring schedules through the client: put (interval and cron), get, list, pause,
resume, delete, and a backfill whose ticks arrive as messages, once."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone

import pytest

from delayq import Backoff, Client, NotFoundError
from serverproc import wait_until


def test_put_get_list_pause_resume_delete(client: Client, queue: str) -> None:
    every = client.put_schedule(
        queue, "cleanup", {"task": "cleanup"}, every="10m", missed="once", jitter="5s",
        overlap="skip", priority=7, max_attempts=3, backoff=Backoff.fixed("1s"),
        handler_timeout=timedelta(seconds=30))
    assert (every.name, every.every_ms, every.cron, every.missed, every.overlap) == (
        "cleanup", 600_000, None, "once", "skip")
    assert (every.jitter_ms, every.priority, every.max_attempts, every.handler_timeout_ms) == (
        5_000, 7, 3, 30_000)
    assert every.payload == {"task": "cleanup"} and not every.paused
    ticks = every.next_ticks_ms
    assert len(ticks) == 5 and all(t % 600_000 == 0 for t in ticks)  # on the epoch's grid
    assert ticks == sorted(ticks) and ticks[0] > time.time() * 1000 - 1000

    cron = client.put_schedule(queue, "report", b"\x00\x01", cron="0 30 9 * * MON-FRI",
                               time_zone="Europe/Berlin")
    assert (cron.cron, cron.time_zone, cron.every_ms, cron.payload) == (
        "0 30 9 * * MON-FRI", "Europe/Berlin", None, b"\x00\x01")

    assert [s.name for s in client.list_schedules(queue)] == ["cleanup", "report"]
    assert client.get_schedule(queue, "report").next_ticks_ms == cron.next_ticks_ms
    assert client.pause_schedule(queue, "report").paused
    assert client.get_schedule(queue, "report").paused
    assert not client.resume_schedule(queue, "report").paused

    assert client.delete_schedule(queue, "report") is True
    with pytest.raises(NotFoundError):
        client.get_schedule(queue, "report")
    with pytest.raises(NotFoundError):
        client.delete_schedule(queue, "report")
    assert [s.name for s in client.list_schedules(queue)] == ["cleanup"]
    client.delete_schedule(queue, "cleanup")


def test_a_schedule_fires_by_cron_or_by_every_exactly(client: Client, queue: str) -> None:
    with pytest.raises(ValueError):
        client.put_schedule(queue, "both", 1, cron="@daily", every="1d")
    with pytest.raises(ValueError):
        client.put_schedule(queue, "neither", 1)
    with pytest.raises(ValueError):
        client.put_schedule(queue, "zone", 1, every="1h", time_zone="Europe/Berlin")


def test_backfill_sends_the_ticks_never_sent_once(client: Client, queue: str) -> None:
    created = client.put_schedule(queue, "tick", {"t": 1}, every="1s")
    # Paused at once: the ticks of the next seconds are skipped, for the backfill to send.
    client.pause_schedule(queue, "tick")
    wait_until(lambda: time.time() * 1000 >= created.created_ms + 3_000, 10,
               "three seconds of ticks to pass")
    start = datetime.fromtimestamp(created.created_ms / 1000, timezone.utc)
    end = datetime.now(timezone.utc) - timedelta(milliseconds=100)
    first = client.backfill_schedule(queue, "tick", from_=start, to=end)
    assert first.sent >= 1
    ids = [d.id for d in client.receive(queue, max=100, wait="2s")]
    assert len(ids) >= first.sent and all(i.startswith("sched:tick:") for i in ids)
    again = client.backfill_schedule(queue, "tick", from_=start, to=end)
    assert (again.sent, again.already_sent) == (0, first.sent + first.already_sent)
    client.delete_schedule(queue, "tick")
