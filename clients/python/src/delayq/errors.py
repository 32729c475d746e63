"""Typed exceptions for the API's errors.

Every error the server answers is ``{"error": {"code", "message"}}`` with an HTTP status.
:func:`error_from_response` turns one into the most specific subclass of
:class:`DelayqError`: first by its stable ``code``, then by its status, so a code added to the
server later still lands in the right family.
"""

from __future__ import annotations

from typing import Dict, Optional, Type

import httpx

__all__ = [
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
    "error_from_response",
]


class DelayqError(Exception):
    """An error answered by the server (or, for :class:`TransportError`, no answer at all).

    ``status`` is the HTTP status (0 when no answer came), ``code`` the API's stable code
    (``invalid_queue_name``, ``lease_lost``, ...), ``message`` the server's words.
    """

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message


class InvalidInputError(DelayqError):
    """400 (and 405, 408, 415): the request is wrong in a way the caller must fix
    (``invalid_queue_name``, ``invalid_id``, ``invalid_duration``, ``malformed_json``, ...)."""


class UnauthorizedError(DelayqError):
    """401 ``unauthorized``: no bearer token, or one the server does not know."""


class ForbiddenError(DelayqError):
    """403: the token's role does not allow the call (``forbidden``), or the request came
    from a host or page the server refuses (``host_not_allowed``, ``cross_origin``)."""


class NotFoundError(DelayqError):
    """404 ``not_found``: no such message, dead letter, schedule, push target or webhooks
    (``no_route`` for a path the server does not have)."""


class ConflictError(DelayqError):
    """409: the message is not in a state that allows the call."""


class LeaseLostError(ConflictError):
    """409 ``lease_lost``: the delivery's lease passed or was taken over; nothing changed."""


class WrongStateError(ConflictError):
    """409 ``wrong_state``: e.g. cancelling a message in flight or dead."""


class TooLargeError(DelayqError):
    """413: ``body_too_large``, ``batch_too_large`` or ``payload_too_large``."""


class UnavailableError(DelayqError):
    """503: Redis did not answer in time (``unavailable``), is full (``redis_full``), a send
    was not replicated in time (``not_replicated``; the message is written all the same),
    the queue's data is newer than the server (``newer_data_format``), or the queue encrypts
    its payloads and the server has no key (``no_encryption_key``) or its encryption changed
    twice during the send (``encryption_changed``; nothing was written)."""


class ServerError(DelayqError):
    """500 ``internal`` or another status the client does not expect: a server bug."""


class TransportError(DelayqError):
    """No answer: the connection failed or timed out (status 0, code ``transport``)."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "transport", message)


# Codes whose class is more specific than their status's.
_BY_CODE: Dict[str, Type[DelayqError]] = {
    "lease_lost": LeaseLostError,
    "wrong_state": WrongStateError,
    "unauthorized": UnauthorizedError,
    "forbidden": ForbiddenError,
    "host_not_allowed": ForbiddenError,
    "cross_origin": ForbiddenError,
    "not_found": NotFoundError,
    "no_route": NotFoundError,
    "unavailable": UnavailableError,
    "redis_full": UnavailableError,
    "not_replicated": UnavailableError,
    "newer_data_format": UnavailableError,
    "no_encryption_key": UnavailableError,
    "encryption_changed": UnavailableError,
}

_BY_STATUS: Dict[int, Type[DelayqError]] = {
    400: InvalidInputError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    405: InvalidInputError,
    408: InvalidInputError,
    409: ConflictError,
    413: TooLargeError,
    415: InvalidInputError,
    503: UnavailableError,
}


def error_from_response(response: httpx.Response) -> DelayqError:
    """The typed error of a non-2xx answer. A body that is not the API's error shape (a
    proxy's page, say) still gives an error, with code ``http_<status>``."""
    status = response.status_code
    code: Optional[str] = None
    message = ""
    try:
        detail = response.json().get("error")
        if isinstance(detail, dict):
            code = str(detail.get("code", "")) or None
            message = str(detail.get("message", ""))
    except (ValueError, AttributeError):
        pass
    if code is None:
        code = f"http_{status}"
        message = response.text[:200]
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status, ServerError)
    return cls(status, code, message)
