"""A queue's groups through the client: list, read, one group's own settings, and pause and
resume of one group while the rest of the queue flows."""

from __future__ import annotations

from delayq import Client, GroupSummary, RateLimit


def test_list_get_configure_pause_resume(client: Client, queue: str) -> None:
    tenant = "tenant:acme/eu"  # ':' and '/' travel percent-encoded in the path
    for n in range(3):
        client.send(queue, {"n": n}, group=tenant)
    client.send(queue, "other", group="globex")

    page = client.list_groups(queue)
    assert page.total == 2
    assert page.groups == [GroupSummary(tenant, 3), GroupSummary("globex", 1)]
    assert client.list_groups(queue, offset=1, limit=1).groups == [GroupSummary("globex", 1)]

    g = client.get_group(queue, tenant)
    assert (g.name, g.ready, g.delayed, g.in_flight, g.paused, g.weight) == (
        tenant, 3, 0, 0, False, 1)
    assert (g.concurrency, g.own_concurrency, g.rate_limit) == (None, None, None)

    g = client.configure_group(queue, tenant, concurrency=2, weight=3,
                               rate_limit=RateLimit(1, burst=1))
    assert (g.concurrency, g.own_concurrency, g.weight) == (2, 2, 3)
    assert g.rate_limit == g.own_rate_limit == RateLimit(1, 1)
    g = client.configure_group(queue, tenant, concurrency=None, weight=None, rate_limit=None)
    assert (g.own_concurrency, g.weight, g.own_rate_limit) == (None, 1, None)

    assert client.pause_group(queue, tenant).paused
    # The paused group's messages wait; the rest of the queue flows.
    assert [d.payload for d in client.receive(queue, max=10, wait="1s")] == ["other"]
    assert client.receive(queue, max=10) == []
    assert not client.resume_group(queue, tenant).paused
    resumed = client.receive(queue, max=10, wait="2s")
    assert sorted(d.payload["n"] for d in resumed) == [0, 1, 2]
    assert all(d.group == tenant for d in resumed)
