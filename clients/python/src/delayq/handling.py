"""What the two workers share: how a handler says how it failed, the bookkeeping of one
delivery in their hands, and what an ack that went with a receive says.

A handler that returns acks its delivery. One that raises nacks it with the error's text:
retried by the message's backoff, or after ``retry_after`` when it raises :class:`RetryLater`,
or a dead letter at once when it raises :class:`PermanentFailure`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from enum import Enum
from typing import List, Optional

from ._convert import Duration
from .models import Delivery, SettleResult

__all__ = ["RetryLater", "PermanentFailure", "NackArgs", "nack_args", "Job", "JobState",
           "report_lost_acks"]

log = logging.getLogger("delayq.worker")

# A receipt is 25 characters, then the message id.
_RECEIPT_HEAD = 25


def report_lost_acks(acked: List[SettleResult]) -> None:
    """Logs each ack that went with a receive and found its lease lost."""
    for result in acked:
        if not result.ok:
            log.warning("%s: lease lost before it could be settled",
                        result.receipt[_RECEIPT_HEAD:])

# The server keeps an error's first 512 bytes; send a little more and let it cut.
_MAX_ERROR_CHARS = 1000


class RetryLater(Exception):
    """Raised by a handler: this attempt failed; try again after ``retry_after``."""

    def __init__(self, error: str, retry_after: Duration) -> None:
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


def error_text(exc: BaseException) -> str:
    """What a failed attempt records: the exception's type and message."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text[:_MAX_ERROR_CHARS]


def nack_args(exc: BaseException, default_retry_after: Optional[Duration]) -> NackArgs:
    """The nack of a handler that raised ``exc``."""
    if isinstance(exc, PermanentFailure):
        return NackArgs(exc.error[:_MAX_ERROR_CHARS], dead=True)
    if isinstance(exc, RetryLater):
        return NackArgs(exc.error[:_MAX_ERROR_CHARS], retry_after=exc.retry_after)
    return NackArgs(error_text(exc), retry_after=default_retry_after)


class JobState(Enum):
    """Where a delivery in a worker's hands stands. Only RUNNING moves, and only once: the
    outcome (settled by the handler, handed back at shutdown, lease lost) is decided exactly
    once, so a message is never acked after it was released, nor released after it ran."""

    RUNNING = "running"
    FINISHED = "finished"
    RELEASED = "released"
    LOST = "lost"


class Job:
    """One delivery being handled, and its lease as this process sees it."""

    def __init__(self, delivery: Delivery, lease_seconds: float, claimed_at: float) -> None:
        self.delivery = delivery
        # Counted from before the receive was sent, by the local monotonic clock, so it is
        # never later than the server's deadline.
        self.lease_ends = claimed_at + lease_seconds
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
