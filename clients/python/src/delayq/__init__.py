"""Python client of delayq, the delayed-message queue on Redis.

- :class:`Client` / :class:`AsyncClient`: send, get, cancel, reschedule; receive and settle;
  stats, pause, resume, dead letters, push targets.
- :class:`Worker` (threads) / :class:`AsyncWorker` (asyncio): long-poll, run a handler with
  leases kept alive, ack or nack, stop gracefully.
- :func:`verify_push`: check the signature of a request the server pushed.
- Errors are :class:`DelayqError` subclasses, by the API's error codes.
"""

from ._transport import NO_RETRY, RetryPolicy, __version__
from .aio import AsyncClient
from .aio_worker import AsyncHandler, AsyncWorker, HandlerTimeout
from .client import DEFAULT_URL, Client
from .errors import (
    ConflictError, DelayqError, ForbiddenError, InvalidInputError, LeaseLostError,
    NotFoundError, ServerError, TooLargeError, TransportError, UnauthorizedError,
    UnavailableError, WrongStateError,
)
from .handling import PermanentFailure, RetryLater
from .models import (
    Backoff, CancelMany, CancelResult, DeadLetter, DeadLetterPage, Delivery, FailedAttempt, Message, NewMessage,
    PushTarget, QueueDeleted, QueueStats, Sent, SettleResult,
)
from .push import sign_push, verify_push
from .worker import Handler, Worker

__all__ = [
    "__version__",
    "DEFAULT_URL",
    "Client",
    "AsyncClient",
    "RetryPolicy",
    "NO_RETRY",
    "Worker",
    "AsyncWorker",
    "Handler",
    "AsyncHandler",
    "HandlerTimeout",
    "RetryLater",
    "PermanentFailure",
    "verify_push",
    "sign_push",
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
    "DeadLetter",
    "DeadLetterPage",
    "PushTarget",
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
