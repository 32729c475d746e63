"""A queue's groups (role ``admin``: group names are tenants' names): list them, read one,
and change one group's own settings, its concurrency, weight and rate limit, or pause and
resume it while the rest of the queue flows. Sending with a group is ``send(group=...)``;
the queue-wide group limits are settings (``configure``). See ``docs/groups.md``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import httpx

from ._ops import UNSET, Spec, operation
from .models import RateLimit

__all__ = ["Group", "GroupSummary", "GroupPage", "list_groups", "get_group",
           "configure_group", "pause_group", "resume_group"]


@dataclass(frozen=True)
class GroupSummary:
    """A group in a list: its name and its messages, pending and in flight."""

    name: str
    messages: int


@dataclass(frozen=True)
class GroupPage:
    """A page of groups, most messages first, and how many groups have messages in all."""

    total: int
    groups: List[GroupSummary]


@dataclass(frozen=True)
class Group:
    """One group: what it holds and its settings. ``concurrency`` and ``rate_limit`` are
    those in force (its own, else the queue's); ``own_*`` its own, if any. ``weight``: the
    messages it gives per turn of the rotation."""

    name: str
    delayed: int
    ready: int
    in_flight: int
    paused: bool
    weight: int
    concurrency: Optional[int]
    own_concurrency: Optional[int]
    rate_limit: Optional[RateLimit]
    own_rate_limit: Optional[RateLimit]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Group":
        return cls(
            obj["name"], obj["delayed"], obj["ready"], obj["in_flight"], bool(obj["paused"]),
            obj["weight"], obj.get("concurrency"), obj.get("own_concurrency"),
            RateLimit.from_json(obj.get("rate_limit")),
            RateLimit.from_json(obj.get("own_rate_limit")), obj,
        )


def _group(response: httpx.Response) -> Group:
    return Group.from_json(response.json())


def _page(response: httpx.Response) -> GroupPage:
    body = response.json()
    return GroupPage(int(body["total"]),
                     [GroupSummary(g["name"], int(g["messages"])) for g in body["groups"]])


@operation("GET /v1/queues/{queue}/groups")
def list_groups(queue: str, offset: int = 0, limit: int = 100) -> Spec[GroupPage]:
    """A page of the queue's groups with messages, most messages first."""
    return Spec(_page, {"queue": queue}, params={"offset": offset, "limit": limit},
                idempotent=True)


@operation("GET /v1/queues/{queue}/groups/{group}")
def get_group(queue: str, group: str) -> Spec[Group]:
    """One group (a group with no messages and no settings reads as all zeros)."""
    return Spec(_group, {"queue": queue, "group": group}, idempotent=True)


@operation("PATCH /v1/queues/{queue}/groups/{group}")
def configure_group(queue: str, group: str, concurrency: Optional[int] = UNSET,
                    weight: Optional[int] = UNSET, rate_limit: Optional[RateLimit] = UNSET,
                    paused: bool = UNSET) -> Spec[Group]:
    """Changes the group's own settings given, all or none: ``concurrency`` in place of the
    queue's ``group_concurrency`` (``None``: the queue's again), ``weight`` (1 to 1000;
    ``None``: 1), ``rate_limit`` in place of the queue's ``group_rate_limit`` (``None``:
    the queue's again), ``paused``. Safe to repeat."""
    given = {"concurrency": concurrency, "weight": weight, "paused": paused}
    body: Dict[str, Any] = {k: v for k, v in given.items() if v is not UNSET}
    if rate_limit is not UNSET:
        body["rate_limit"] = None if rate_limit is None else rate_limit.to_json()
    return Spec(_group, {"queue": queue, "group": group}, json=body, idempotent=True)


@operation("PATCH /v1/queues/{queue}/groups/{group}")
def pause_group(queue: str, group: str) -> Spec[Group]:
    """The group's messages wait (those in flight settle as usual); the rest of the queue
    flows."""
    return Spec(_group, {"queue": queue, "group": group}, json={"paused": True},
                idempotent=True)


@operation("PATCH /v1/queues/{queue}/groups/{group}")
def resume_group(queue: str, group: str) -> Spec[Group]:
    """The group's messages are delivered again."""
    return Spec(_group, {"queue": queue, "group": group}, json={"paused": False},
                idempotent=True)
