"""A queue's settings through ``configure``: every PATCH field reaches the server (the stats
show it), ``None`` lifts it, one left out stays, and a refused change changes nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from delayq import Client, InvalidInputError, RateLimit, Retention


def test_every_setting_reaches_the_server_and_none_lifts_it(client: Client,
                                                             queue: str) -> None:
    stats = client.configure(
        queue, idempotency_window="2h", rate_limit=RateLimit(100, burst=10),
        default_ttl="5m", max_delay=timedelta(days=30), on_expire="drop",
        group_concurrency=2, group_rate_limit=RateLimit(5), events=1000,
        retain_completed=Retention("1h", 100))
    raw = stats.raw
    assert (raw["idempotency_window_ms"], raw["default_ttl_ms"], raw["max_delay_ms"]) == (
        7_200_000, 300_000, 2_592_000_000)
    assert (raw["on_expire"], raw["retain_completed"]) == (
        "drop", {"keep_for_ms": 3_600_000, "max": 100})
    assert stats.rate_limit == RateLimit(100, 10)
    assert stats.group_rate_limit == RateLimit(5, 1)
    assert (stats.group_concurrency, stats.events_max) == (2, 1000)

    lifted = client.configure(
        queue, idempotency_window=timedelta(0), rate_limit=None, default_ttl=None,
        max_delay=None, on_expire="dead_letter", group_concurrency=None,
        group_rate_limit=None, events=None, retain_completed=None)
    assert lifted.rate_limit is None and lifted.group_rate_limit is None
    assert lifted.group_concurrency is None and lifted.events_max is None
    raw = lifted.raw
    assert (raw["idempotency_window_ms"], raw["default_ttl_ms"], raw["max_delay_ms"]) == (
        0, None, None)
    assert (raw["on_expire"], raw["retain_completed"]) == ("dead_letter", None)
    assert client.configure(queue, events=True).events_max == 20_000  # the default


def test_a_setting_left_out_stays_and_a_refused_change_changes_nothing(
        client: Client, queue: str) -> None:
    client.configure(queue, rate_limit=RateLimit(7))
    assert client.configure(queue, group_concurrency=3).rate_limit == RateLimit(7, 1)
    with pytest.raises(InvalidInputError) as refused:
        client.configure(queue, rate_limit=RateLimit(9), on_expire="explode")
    assert refused.value.code == "invalid_option"
    stats = client.stats(queue)
    assert (stats.rate_limit, stats.group_concurrency) == (RateLimit(7, 1), 3)
