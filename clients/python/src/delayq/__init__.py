"""Python client of delayq, the delayed-message queue on Redis (server 0.1.x, HTTP API v1).

- :class:`Client` / :class:`AsyncClient`: send, get, cancel, reschedule; receive and settle;
  queues, settings, dead letters, push targets, schedules, groups, events and webhooks.
- :class:`Worker` (threads) / :class:`AsyncWorker` (asyncio): long-poll one queue or several,
  run a handler with leases kept alive, ack or nack (a failure logged with its stack and
  sent with its type and stack), outcome hooks, a prompt and graceful stop.
- :func:`verify_push` / :func:`verify_webhook`: check the signature of a request the server
  pushed, or of an event webhook's call.
- Durations are a ``timedelta`` or text such as ``"2s"``; times an aware ``datetime`` or
  RFC 3339 text; a bare number is refused (:func:`parse_duration` reads the text).
- Errors are :class:`DelayqError` subclasses, by the API's error codes.
"""

from ._durations import Duration, Time, parse_duration
from ._events import Event, EventPage
from ._groups import Group, GroupPage, GroupSummary
from ._schedules import Backfill, Schedule
from ._settings import EventsSetting
from ._sources import QueueSpec
from ._transport import NO_RETRY, RetryPolicy
from ._version import __version__
from ._webhooks import Webhook, Webhooks
from .aio import AsyncClient
from .aio_worker import AsyncHandler, AsyncWorker, HandlerTimeout
from .client import DEFAULT_URL, Client
from .errors import (
    ConflictError, DelayqError, ForbiddenError, InvalidInputError, LeaseLostError,
    NotFoundError, ServerError, TooLargeError, TransportError, UnauthorizedError,
    UnavailableError, WrongStateError,
)
from .handling import Hooks, PermanentFailure, RetryLater, error_text
from .models import (
    Backoff, CancelMany, CancelResult, DeadLetter, DeadLetterPage, Delivery, FailedAttempt,
    Message, NewMessage, PushTarget, QueueDeleted, QueueStats, RateLimit, Retention, Sent,
    SettleResult,
)
from .push import sign_push, sign_webhook, verify_push, verify_webhook
from .worker import Handler, Worker

__all__ = [
    "__version__",
    "DEFAULT_URL",
    "Client",
    "AsyncClient",
    "RetryPolicy",
    "NO_RETRY",
    "Duration",
    "Time",
    "parse_duration",
    "Worker",
    "AsyncWorker",
    "QueueSpec",
    "Handler",
    "AsyncHandler",
    "HandlerTimeout",
    "Hooks",
    "RetryLater",
    "PermanentFailure",
    "error_text",
    "verify_push",
    "sign_push",
    "verify_webhook",
    "sign_webhook",
    "Backoff",
    "NewMessage",
    "Sent",
    "CancelMany",
    "CancelResult",
    "Message",
    "FailedAttempt",
    "Delivery",
    "SettleResult",
    "QueueDeleted",
    "QueueStats",
    "RateLimit",
    "Retention",
    "EventsSetting",
    "DeadLetter",
    "DeadLetterPage",
    "PushTarget",
    "Schedule",
    "Backfill",
    "Group",
    "GroupSummary",
    "GroupPage",
    "Event",
    "EventPage",
    "Webhook",
    "Webhooks",
    "DelayqError",
    "InvalidInputError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "LeaseLostError",
    "WrongStateError",
    "TooLargeError",
    "UnavailableError",
    "ServerError",
    "TransportError",
]
