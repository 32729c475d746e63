"""A worker's settings, read and checked once for the thread and the asyncio worker alike:
its queues, concurrency, the durations of its lease, long poll, grace and extension period
(each a timedelta or text, never a bare number), and its outcome hooks."""

from __future__ import annotations

import datetime as _dt
from dataclasses import dataclass
from typing import Optional

from ._durations import Duration, duration_seconds
from ._sources import QueueSpec, Source
from .handling import CompletedHook, ErrorHook, FailedHook, Hooks

__all__ = ["WorkerOptions", "EXTEND_CHUNK", "POLL_SETTLE", "LEASE", "POLL_WAIT", "GRACE"]

# Most receipts in one extend call (the server's default batch limit is 1000).
EXTEND_CHUNK = 500
# At a stop, how long a long poll under way may end on its own before it is cut. A receive
# that found messages answers within this; one still waiting after it is most likely idle,
# and cutting it strands nothing (cutting one that is being answered would leave its
# messages claimed, unseen, until their leases end).
POLL_SETTLE = 0.25

LEASE = _dt.timedelta(seconds=30)
POLL_WAIT = _dt.timedelta(seconds=10)
GRACE = _dt.timedelta(seconds=30)


@dataclass(frozen=True)
class WorkerOptions:
    """What a worker was given, checked, with each duration also in seconds."""

    source: Source
    concurrency: int
    lease: Duration
    lease_s: float
    poll_wait: Duration
    poll_wait_s: float
    grace_s: float
    extend_every_s: float
    retry_after: Optional[Duration]
    handler_timeout_s: Optional[float]
    hooks: Hooks

    @classmethod
    def of(cls, queue: QueueSpec, *, concurrency: int, lease: Duration, poll_wait: Duration,
           grace: Duration, extend_every: Optional[Duration], retry_after: Optional[Duration],
           handler_timeout: Optional[Duration] = None, log_failures: bool = True,
           on_failed: Optional[FailedHook] = None,
           on_completed: Optional[CompletedHook] = None,
           on_error: Optional[ErrorHook] = None) -> "WorkerOptions":
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency is a whole number of at least 1, not {concurrency!r}")
        lease_s = duration_seconds(lease, "lease")
        every = (duration_seconds(extend_every, "extend_every") if extend_every is not None
                 else max(lease_s / 3, 0.05))
        if retry_after is not None:
            duration_seconds(retry_after, "retry_after")
        timeout = (duration_seconds(handler_timeout, "handler_timeout")
                   if handler_timeout is not None else None)
        return cls(Source.of(queue), concurrency, lease, lease_s, poll_wait,
                   duration_seconds(poll_wait, "poll_wait"), duration_seconds(grace, "grace"),
                   every, retry_after, timeout,
                   Hooks(on_failed, on_completed, on_error, log_failures))
