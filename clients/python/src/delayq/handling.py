"""What the two workers share about a handler's outcome: how a handler says how it failed,
the error text a failed attempt is nacked with, the logging and hooks of outcomes, and the
bookkeeping of one delivery in a worker's hands.

A handler that returns acks its delivery. One that raises nacks it with the error's type,
message and stack (:func:`error_text`): retried by the message's backoff, or after
``retry_after`` when it raises :class:`RetryLater`, or a dead letter at once when it raises
:class:`PermanentFailure`. Each failure is logged with its stack on the ``delayq.worker``
logger unless the worker's ``log_failures`` is off.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
import traceback
from dataclasses import dataclass
from enum import Enum
from typing import Any, Callable, List, Optional

from ._durations import Duration, duration_seconds
from .models import Delivery, SettleResult

__all__ = ["RetryLater", "PermanentFailure", "NackArgs", "nack_args", "error_text", "Hooks",
           "Job", "JobState", "report_lost_acks", "MAX_ERROR_BYTES"]

log = logging.getLogger("delayq.worker")

# A receipt is 25 characters, then the message id.
_RECEIPT_HEAD = 25

# The most of an error text a nack sends (the server keeps the newest error of a message up
# to 4 KiB); its first line, type and message, up to 1 KiB of it.
MAX_ERROR_BYTES = 4096
_SUMMARY_BYTES = 1024
_CUT = "  ... (outer frames cut: the error text is kept to 4 KiB)"


def report_lost_acks(acked: List[SettleResult]) -> None:
    """Logs each ack that went with a receive and found its lease lost."""
    for result in acked:
        if not result.ok:
            log.warning("%s: lease lost before it could be settled",
                        result.receipt[_RECEIPT_HEAD:])


class RetryLater(Exception):
    """Raised by a handler: this attempt failed; try again after ``retry_after`` (a
    timedelta or text such as ``"30s"``)."""

    def __init__(self, error: str, retry_after: Duration) -> None:
        duration_seconds(retry_after, "RetryLater.retry_after")
        super().__init__(error)
        self.error = error
        self.retry_after = retry_after


class PermanentFailure(Exception):
    """Raised by a handler: this message can never succeed; a dead letter now, whatever
    attempts it has left."""

    def __init__(self, error: str) -> None:
        super().__init__(error)
        self.error = error


@dataclass(frozen=True)
class NackArgs:
    """How to nack after a handler raised."""

    error: str
    retry_after: Optional[Duration] = None
    dead: bool = False


def _cut_utf8(text: str, limit: int) -> str:
    """At most ``limit`` bytes of ``text`` in UTF-8, never half a character."""
    return text.encode("utf-8", "replace")[:limit].decode("utf-8", "ignore")


def error_text(exc: BaseException) -> str:
    """What a failed attempt records: a first line ``<ErrorType>: <message>``, then the
    traceback (chained causes included), at most :data:`MAX_ERROR_BYTES` in UTF-8 in all.
    A longer traceback loses its outer frames: the innermost, where it was raised, stay."""
    message = str(exc)
    summary = _cut_utf8(f"{type(exc).__name__}: {message}" if message else type(exc).__name__,
                        _SUMMARY_BYTES)
    te = traceback.TracebackException.from_exception(exc)
    lines = list(te.format())
    only = list(te.format_exception_only())
    if lines[-len(only):] == only:
        lines = lines[:-len(only)]
    stack = "".join(lines).rstrip("\n")
    if not stack:
        return summary
    text = f"{summary}\n{stack}"
    if len(text.encode("utf-8", "replace")) <= MAX_ERROR_BYTES:
        return text
    room = MAX_ERROR_BYTES - len(summary.encode("utf-8", "replace")) - len(_CUT) - 2
    tail = stack.encode("utf-8", "replace")[-room:].decode("utf-8", "ignore")
    tail = tail.split("\n", 1)[1] if "\n" in tail else tail
    return _cut_utf8(f"{summary}\n{_CUT}\n{tail}", MAX_ERROR_BYTES)


def nack_args(exc: BaseException, default_retry_after: Optional[Duration]) -> NackArgs:
    """The nack of a handler that raised ``exc``."""
    if isinstance(exc, PermanentFailure):
        return NackArgs(error_text(exc), dead=True)
    if isinstance(exc, RetryLater):
        return NackArgs(error_text(exc), retry_after=exc.retry_after)
    return NackArgs(error_text(exc), retry_after=default_retry_after)


FailedHook = Callable[[Delivery, BaseException], Any]
CompletedHook = Callable[[Delivery, Any], Any]
ErrorHook = Callable[[BaseException], Any]


@dataclass(frozen=True)
class Hooks:
    """A worker's outcome reporting. ``on_failed(delivery, exc)`` after a handler raised
    (its nack sent), ``on_completed(delivery, result)`` after one returned (its ack sent, or
    going with the next receive), ``on_error(exc)`` when the worker's own work failed (a
    receive, ack, extend or release). A hook that raises is logged and otherwise ignored;
    the async worker awaits a hook that returns an awaitable."""

    on_failed: Optional[FailedHook] = None
    on_completed: Optional[CompletedHook] = None
    on_error: Optional[ErrorHook] = None
    log_failures: bool = True

    def log_failure(self, delivery: Delivery, exc: BaseException) -> None:
        """The handler's failure on the ``delayq.worker`` logger, with its stack: ERROR (as
        ``logger.exception``), WARNING for a :class:`RetryLater`."""
        if not self.log_failures:
            return
        level = logging.WARNING if isinstance(exc, RetryLater) else logging.ERROR
        log.log(level, "handler failed on %s of %s (attempt %d): %s: %s", delivery.id,
                delivery.queue, delivery.attempt, type(exc).__name__, exc, exc_info=exc)

    def failed(self, delivery: Delivery, exc: BaseException) -> Any:
        return _call("on_failed", self.on_failed, delivery, exc)

    def completed(self, delivery: Delivery, result: Any) -> Any:
        return _call("on_completed", self.on_completed, delivery, result)

    def error(self, exc: BaseException) -> Any:
        return _call("on_error", self.on_error, exc)


def _call(name: str, hook: Optional[Callable[..., Any]], *args: Any) -> Any:
    """Runs a hook; what it returns (an awaitable, for the async worker to await), or None
    if there is none or it raised (logged)."""
    if hook is None:
        return None
    try:
        return hook(*args)
    except Exception:  # noqa: BLE001 - a hook never stops a worker
        log.exception("the worker's %s hook raised", name)
        return None


async def settle_hook(name: str, result: Any) -> None:
    """Awaits what an async hook returned, logging a failure."""
    if inspect.isawaitable(result):
        try:
            await result
        except Exception:  # noqa: BLE001 - a hook never stops a worker
            log.exception("the worker's %s hook raised", name)


class JobState(Enum):
    """Where a delivery in a worker's hands stands. Only RUNNING moves, and only once: the
    outcome (settled by the handler, handed back at shutdown, lease lost) is decided exactly
    once, so a message is never acked after it was released, nor released after it ran."""

    RUNNING = "running"
    FINISHED = "finished"
    RELEASED = "released"
    LOST = "lost"


# A handler whose lease could not be extended is given up (the async worker cancels it) once
# this share of the lease is left, not when an extend finally fails: the server hands the
# message to another consumer the moment the lease ends, and a busy process acts on its timers
# late. With extends every third of the lease, a lease still gets two tries at renewal first.
LEASE_MARGIN = 1 / 5


class Job:
    """One delivery being handled, and its lease as this process sees it."""

    def __init__(self, delivery: Delivery, lease_seconds: float, claimed_at: float) -> None:
        self.delivery = delivery
        # Counted from before the receive was sent, by the local monotonic clock, so it is
        # never later than the server's deadline.
        self.lease_ends = claimed_at + lease_seconds
        # The async worker's timer that gives the job up at the lease's margin.
        self.lease_timer: Optional[asyncio.TimerHandle] = None
        self.state = JobState.RUNNING
        self._lock = threading.Lock()

    def decide(self, state: JobState) -> bool:
        """Moves a running job to ``state``; False if its outcome was already decided."""
        with self._lock:
            if self.state is not JobState.RUNNING:
                return False
            self.state = state
            return True

    @property
    def running(self) -> bool:
        return self.state is JobState.RUNNING

    def lease_passed(self) -> bool:
        return time.monotonic() >= self.lease_ends
