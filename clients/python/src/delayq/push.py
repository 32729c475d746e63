"""Checking that a request came from delayq: a push (for the receiver of a push queue) or an
event webhook's call.

The server signs each with ``Delayq-Signature: t=<unix s>,v1=<hex>,v2=<hex>[,w1=<hex>]`` (one
of each per signing key while keys rotate), every one an HMAC-SHA256 under a key:

- ``v2`` (pushes): of ``<t>\\n<queue>\\n<id>\\n<attempt>\\n<body>``, the middle three being
  the ``Delayq-Queue``, ``Delayq-Message-Id`` and ``Delayq-Attempt`` headers, so a captured
  request cannot be replayed as another attempt, message or queue. A receiver also treats
  an (id, attempt) it has handled as done: delivery is at least once.
- ``w1`` (webhooks): of ``<t>\\n<queue>\\n<event id>\\n<body>``, the event id being the
  ``Delayq-Event-Id`` header. A receiver drops an event id it has handled (kept 15 minutes),
  never by message id and attempt: one message has many events under one id and attempt.
- ``v1`` (the body alone) is deprecated and never accepted here.

Both verifiers refuse a ``t`` further than ``tolerance`` (5 minutes) from this machine's
clock, compare in constant time, and answer False, never raise, for a missing or malformed
header.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import hmac
import time
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ._durations import Duration, duration_seconds

__all__ = ["verify_push", "sign_push", "verify_webhook", "sign_webhook", "SIGNATURE_HEADER"]

SIGNATURE_HEADER = "Delayq-Signature"
QUEUE_HEADER = "Delayq-Queue"
ID_HEADER = "Delayq-Message-Id"
ATTEMPT_HEADER = "Delayq-Attempt"
EVENT_ID_HEADER = "Delayq-Event-Id"

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
Keys = Union[str, bytes, Sequence[Union[str, bytes]]]

FIVE_MINUTES = _dt.timedelta(minutes=5)


def _header(headers: Headers, name: str) -> Optional[str]:
    """A header's value whatever the case of its name (a plain dict, Starlette's or httpx's
    headers, or a list of pairs)."""
    items = headers.items() if isinstance(headers, Mapping) else headers
    wanted = name.lower()
    for key, value in items:
        if key.lower() == wanted:
            return value
    return None


def _key_list(keys: Keys) -> List[bytes]:
    if isinstance(keys, (str, bytes)):
        keys = [keys]
    return [k.encode() if isinstance(k, str) else bytes(k) for k in keys]


def _unix_seconds(at: Optional[_dt.datetime], field: str) -> int:
    """``at`` (an aware datetime; default: now) in whole Unix seconds."""
    if at is None:
        return int(time.time())
    if not isinstance(at, _dt.datetime):
        raise TypeError(f"{field}: an aware datetime, not {at!r}")
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError(f"{field}: give an aware datetime (e.g. datetime.now(timezone.utc)),"
                         " not a naive one")
    return int(at.timestamp())


def _mac(key: bytes, fields: Sequence[str], body: bytes) -> str:
    signed = "".join(f"{f}\n" for f in fields).encode() + body
    return hmac.new(key, signed, hashlib.sha256).hexdigest()


def _verify(headers: Headers, raw_body: bytes, keys: Keys, names: Sequence[str],
            version: str, tolerance: Duration, now: Optional[_dt.datetime]) -> bool:
    """True when the signature header holds a ``version`` signature, under one of ``keys``,
    of its ``t`` and the headers ``names`` and the body, with ``t`` within ``tolerance``."""
    allowed = duration_seconds(tolerance, "tolerance")
    clock = _unix_seconds(now, "now")
    signature = _header(headers, SIGNATURE_HEADER)
    values = [_header(headers, name) for name in names]
    if signature is None or any(v is None for v in values):
        return False
    t: Optional[str] = None
    candidates: List[str] = []
    for part in signature.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            t = value
        elif name == version:
            candidates.append(value)
    if t is None or not (t.isascii() and t.isdigit()) or not candidates:
        return False
    if abs(clock - int(t)) > allowed:
        return False
    fields = [t] + [v for v in values if v is not None]
    body = bytes(raw_body)
    matched = False
    # Every key against every signature, without stopping early: how long this takes says
    # nothing about which comparison came close.
    for key in _key_list(keys):
        try:
            expected = _mac(key, fields, body).encode("ascii")
        except UnicodeError:
            # A header no sender could have signed (a lone surrogate, say).
            return False
        for candidate in candidates:
            # As bytes: compare_digest raises TypeError on a str that is not ASCII, and a
            # header may hold anything.
            matched |= hmac.compare_digest(expected, candidate.lower().encode("utf-8", "replace"))
    return matched


def verify_push(headers: Headers, raw_body: bytes, keys: Keys,
                tolerance: Duration = FIVE_MINUTES, *,
                now: Optional[_dt.datetime] = None) -> bool:
    """True when ``raw_body`` (the bytes as received, before any parsing) and the request's
    ``Delayq-*`` headers carry a ``v2`` signature under one of ``keys`` made within
    ``tolerance`` of ``now`` (an aware datetime; default: this machine's clock)."""
    return _verify(headers, raw_body, keys, (QUEUE_HEADER, ID_HEADER, ATTEMPT_HEADER), "v2",
                   tolerance, now)


def verify_webhook(headers: Headers, raw_body: bytes, keys: Keys,
                   tolerance: Duration = FIVE_MINUTES, *,
                   now: Optional[_dt.datetime] = None) -> bool:
    """True when an event webhook's request (its raw body, and its ``Delayq-Queue`` and
    ``Delayq-Event-Id`` headers) carries a ``w1`` signature under one of ``keys`` (the
    queue's webhook keys) made within ``tolerance`` of ``now``. Then drop the event if its
    ``Delayq-Event-Id`` was handled already."""
    return _verify(headers, raw_body, keys, (QUEUE_HEADER, EVENT_ID_HEADER), "w1",
                   tolerance, now)


def sign_push(keys: Keys, queue: str, id: str, attempt: int, body: bytes,
              at: Optional[_dt.datetime] = None) -> str:
    """A push's ``Delayq-Signature`` value as the server makes it (``v1`` and ``v2`` per
    key), at ``at`` (default now), for tests of a receiver and for relaying pushes."""
    t = str(_unix_seconds(at, "at"))
    value = f"t={t}"
    for key in _key_list(keys):
        v1 = hmac.new(key, f"{t}.".encode() + bytes(body), hashlib.sha256).hexdigest()
        value += f",v1={v1},v2={_mac(key, [t, queue, id, str(attempt)], bytes(body))}"
    return value


def sign_webhook(keys: Keys, queue: str, event_id: str, body: bytes,
                 at: Optional[_dt.datetime] = None) -> str:
    """A webhook request's ``Delayq-Signature`` value with its ``w1`` per key (the server
    adds a push's ``v1`` and ``v2``, which :func:`verify_webhook` does not read), for tests
    of a receiver."""
    t = str(_unix_seconds(at, "at"))
    return f"t={t}" + "".join(f",w1={_mac(key, [t, queue, event_id], bytes(body))}"
                              for key in _key_list(keys))
