"""Recurring schedules (role ``admin``): a schedule sends one message per tick of a cron
expression or an interval, each an ordinary message of the queue with the caller id
``sched:<name>:<tick ms>``. Put (create or replace), read, list, delete, pause, resume, and
backfill the ticks of a past range that were never sent. See ``docs/schedules.md``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import httpx

from ._convert import payload_fields, payload_of
from ._durations import Duration, Time, duration_json, time_json
from ._ops import Spec, operation
from .models import Backoff

__all__ = ["Schedule", "Backfill", "put_schedule", "get_schedule", "list_schedules",
           "delete_schedule", "pause_schedule", "resume_schedule", "backfill_schedule"]


@dataclass(frozen=True)
class Schedule:
    """A schedule as the server shows it: when it fires (``cron`` in ``time_zone``, or every
    ``every_ms``), what it does with missed ticks (``missed``: ``skip``, ``once``,
    ``all:N``) and overlapping ones (``overlap``: ``allow`` or ``skip``), the message each
    tick becomes, the last tick sent and the next five (Unix ms)."""

    name: str
    cron: Optional[str]
    time_zone: Optional[str]
    every_ms: Optional[int]
    missed: str
    overlap: str
    paused: bool
    priority: int
    max_attempts: int
    jitter_ms: Optional[int]
    handler_timeout_ms: Optional[int]
    payload: Any
    created_ms: int
    last_tick_ms: Optional[int]
    next_ticks_ms: List[int]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Schedule":
        return cls(
            obj["name"], obj.get("cron"), obj.get("time_zone"), obj.get("every_ms"),
            obj["missed"], obj["overlap"], bool(obj["paused"]), obj["priority"],
            obj["max_attempts"], obj.get("jitter_ms"), obj.get("handler_timeout_ms"),
            payload_of(obj), obj["created_ms"], obj.get("last_tick_ms"),
            list(obj["next_ticks_ms"]), obj,
        )


@dataclass(frozen=True)
class Backfill:
    """What a backfill did: ticks of the range sent now, and those sent before (nothing
    written for them)."""

    sent: int
    already_sent: int


def _schedule(response: httpx.Response) -> Schedule:
    return Schedule.from_json(response.json())


def _schedules(response: httpx.Response) -> List[Schedule]:
    return [Schedule.from_json(s) for s in response.json()["schedules"]]


def _deleted(response: httpx.Response) -> bool:
    return bool(response.json()["deleted"])


def _backfill(response: httpx.Response) -> Backfill:
    body = response.json()
    return Backfill(int(body["sent"]), int(body["already_sent"]))


@operation("PUT /v1/queues/{queue}/schedules/{name}")
def put_schedule(queue: str, name: str, payload: Any, cron: Optional[str] = None,
                 time_zone: Optional[str] = None, every: Optional[Duration] = None,
                 missed: Optional[str] = None, jitter: Optional[Duration] = None,
                 overlap: Optional[str] = None, priority: Optional[int] = None,
                 max_attempts: Optional[int] = None, backoff: Optional[Backoff] = None,
                 handler_timeout: Optional[Duration] = None) -> Spec[Schedule]:
    """Creates or replaces a schedule (it goes on from its last tick; a paused one stays
    paused). Give ``cron`` (with ``time_zone``, default UTC) or ``every`` (1 s to 366 days,
    on a grid from the Unix epoch). Safe to repeat."""
    if (cron is None) == (every is None):
        raise ValueError("a schedule fires by cron= or by every=, exactly one of them")
    if time_zone is not None and cron is None:
        raise ValueError("time_zone= goes with cron=")
    body: Dict[str, Any] = payload_fields(payload)
    if cron is not None:
        body["cron"] = cron
    if every is not None:
        body["every"] = duration_json(every, "every")
    for key, span in (("jitter", jitter), ("handler_timeout", handler_timeout)):
        if span is not None:
            body[key] = duration_json(span, key)
    plain = {"time_zone": time_zone, "missed": missed, "overlap": overlap,
             "priority": priority, "max_attempts": max_attempts}
    body.update({k: v for k, v in plain.items() if v is not None})
    if backoff is not None:
        body["backoff"] = backoff.body
    return Spec(_schedule, {"queue": queue, "name": name}, json=body, idempotent=True)


@operation("GET /v1/queues/{queue}/schedules/{name}")
def get_schedule(queue: str, name: str) -> Spec[Schedule]:
    """One schedule (:class:`~delayq.NotFoundError` if there is none)."""
    return Spec(_schedule, {"queue": queue, "name": name}, idempotent=True)


@operation("GET /v1/queues/{queue}/schedules")
def list_schedules(queue: str) -> Spec[List[Schedule]]:
    """Every schedule of the queue, by name."""
    return Spec(_schedules, {"queue": queue}, idempotent=True)


@operation("DELETE /v1/queues/{queue}/schedules/{name}")
def delete_schedule(queue: str, name: str) -> Spec[bool]:
    """Deletes a schedule (a tick sent ahead and not yet due is cancelled with it).
    :class:`~delayq.NotFoundError` if there is none; so not retried."""
    return Spec(_deleted, {"queue": queue, "name": name})


@operation("PATCH /v1/queues/{queue}/schedules/{name}")
def pause_schedule(queue: str, name: str) -> Spec[Schedule]:
    """No tick fires until :func:`resume_schedule`."""
    return Spec(_schedule, {"queue": queue, "name": name}, json={"paused": True},
                idempotent=True)


@operation("PATCH /v1/queues/{queue}/schedules/{name}")
def resume_schedule(queue: str, name: str) -> Spec[Schedule]:
    """Ticks fire again; the schedule's ``missed`` policy says which of those it skipped
    fire now."""
    return Spec(_schedule, {"queue": queue, "name": name}, json={"paused": False},
                idempotent=True)


@operation("POST /v1/queues/{queue}/schedules/{name}/backfill")
def backfill_schedule(queue: str, name: str, from_: Time, to: Time) -> Spec[Backfill]:
    """Sends each tick from ``from_`` to ``to`` (inclusive, at most now, after the
    schedule's creation) that was never sent, due at once; at most 1,000 a call. A repeat
    sends nothing more, so it is retried."""
    body = {"from": time_json(from_, "from_"), "to": time_json(to, "to")}
    return Spec(_backfill, {"queue": queue, "name": name}, json=body, idempotent=True)
