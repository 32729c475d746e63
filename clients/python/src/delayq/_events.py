"""A queue's events (role: any but monitor): each change of a message's state, when the
queue records them (``configure(queue, events=True)``). A page as JSON, from the oldest kept,
from now, or after a cursor an event or page carried; the clients' ``follow_events`` go on
page after page. The server-sent-events form of the same route is not used: a long-polled
page gives the same events, resumable by the same cursor. See ``docs/events.md``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import httpx

from ._durations import Duration, duration_ms
from ._ops import Spec, holds_for, operation

__all__ = ["Event", "EventPage", "events", "KINDS"]

# Every kind of event, as the server names them.
KINDS = ("sent", "delivered", "acked", "retry", "released", "dead", "expired", "superseded",
         "cancelled", "rescheduled", "requeued", "purged")


@dataclass(frozen=True)
class Event:
    """One change of a message's state: its ``kind`` (see :data:`KINDS`), the message's
    ``id``, when (``at_ms``, the Redis server's clock), and ``cursor``, where a reader that
    saw it goes on from (keep it to resume after a restart). ``attempt``, ``due_ms``,
    ``error`` and ``detail`` as the kind has them; never the payload."""

    kind: str
    id: str
    at_ms: int
    cursor: str
    attempt: Optional[int] = None
    due_ms: Optional[int] = None
    error: Optional[str] = None
    detail: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Event":
        return cls(obj["kind"], obj["id"], obj["at_ms"], obj["cursor"], obj.get("attempt"),
                   obj.get("due_ms"), obj.get("error"), obj.get("detail"), obj)


@dataclass(frozen=True)
class EventPage:
    """A page of events and the ``cursor`` the next page starts from: past every event this
    read looked at, so a filtered page with no events still moves on."""

    events: List[Event]
    cursor: str


def _page(response: httpx.Response) -> EventPage:
    body = response.json()
    return EventPage([Event.from_json(e) for e in body["events"]], body["cursor"])


@operation("GET /v1/queues/{queue}/events")
def events(queue: str, from_: str = "now", kinds: Optional[Sequence[str]] = None,
           id: Optional[str] = None, limit: Optional[int] = None,
           wait: Optional[Duration] = None) -> Spec[EventPage]:
    """A page of the queue's events from ``from_`` (``"oldest"``, ``"now"``, or a cursor),
    only of ``kinds`` and of the message ``id`` if given, at most ``limit`` (1-1000,
    default 100), waiting up to ``wait`` for a first one when there is none yet (a filtered
    page that found nothing answers at once). A read: retried."""
    if isinstance(kinds, str):
        raise TypeError("kinds: a list of kinds, e.g. ['acked', 'dead']")
    params: Dict[str, Any] = {"from": from_}
    if kinds:
        params["kind"] = ",".join(kinds)
    if id is not None:
        params["id"] = id
    if limit is not None:
        params["limit"] = limit
    if wait is not None:
        params["wait_ms"] = duration_ms(wait, "wait")
    return Spec(_page, {"queue": queue}, params=params, idempotent=True,
                holds_for=holds_for(wait))
