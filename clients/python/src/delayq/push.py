"""Checking that a pushed request came from delayq, for the receiver of a push queue.

The server signs each push with ``Delayq-Signature: t=<unix s>,v1=<hex>,v2=<hex>`` (a ``v1``
and a ``v2`` per signing key while keys rotate). ``v2`` is HMAC-SHA256 under the key of
``<t>\\n<queue>\\n<id>\\n<attempt>\\n<body>``, the middle three being the ``Delayq-Queue``,
``Delayq-Message-Id`` and ``Delayq-Attempt`` headers, so a captured request cannot be replayed
as another attempt, message or queue. ``v1`` (the body alone) is deprecated and never
accepted here. A receiver should also treat an (id, attempt) it has already handled as done:
delivery is at least once.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

__all__ = ["verify_push", "sign_push", "SIGNATURE_HEADER"]

SIGNATURE_HEADER = "Delayq-Signature"
QUEUE_HEADER = "Delayq-Queue"
ID_HEADER = "Delayq-Message-Id"
ATTEMPT_HEADER = "Delayq-Attempt"

Headers = Union[Mapping[str, str], Iterable[Tuple[str, str]]]
Keys = Union[str, bytes, Sequence[Union[str, bytes]]]


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


def _v2(key: bytes, t: str, queue: str, id: str, attempt: str, body: bytes) -> str:
    signed = f"{t}\n{queue}\n{id}\n{attempt}\n".encode() + body
    return hmac.new(key, signed, hashlib.sha256).hexdigest()


def verify_push(headers: Headers, raw_body: bytes, keys: Keys,
                tolerance_seconds: float = 300, *, now: Optional[float] = None) -> bool:
    """True when ``raw_body`` (the bytes as received, before any parsing) and the request's
    ``Delayq-*`` headers carry a ``v2`` signature under one of ``keys`` made within
    ``tolerance_seconds`` of ``now`` (default: this machine's clock). Missing or malformed
    headers are False, never an exception. Comparisons take constant time."""
    signature = _header(headers, SIGNATURE_HEADER)
    queue = _header(headers, QUEUE_HEADER)
    id = _header(headers, ID_HEADER)
    attempt = _header(headers, ATTEMPT_HEADER)
    if signature is None or queue is None or id is None or attempt is None:
        return False
    t: Optional[str] = None
    candidates: List[str] = []
    for part in signature.split(","):
        name, _, value = part.strip().partition("=")
        if name == "t":
            t = value
        elif name == "v2":
            candidates.append(value)
    if t is None or not (t.isascii() and t.isdigit()) or not candidates:
        return False
    clock = time.time() if now is None else now
    if abs(clock - int(t)) > tolerance_seconds:
        return False
    body = bytes(raw_body)
    matched = False
    # Every key against every v2, without stopping early: how long this takes says nothing
    # about which comparison came close.
    for key in _key_list(keys):
        try:
            expected = _v2(key, t, queue, id, attempt, body)
        except UnicodeError:
            # A header no sender could have signed (a lone surrogate, say).
            return False
        for candidate in candidates:
            # As bytes: compare_digest raises TypeError on a str that is not ASCII, and a
            # header may hold anything.
            given = candidate.lower().encode("utf-8", "replace")
            matched |= hmac.compare_digest(expected.encode("ascii"), given)
    return matched


def sign_push(keys: Keys, queue: str, id: str, attempt: int, body: bytes,
              timestamp: Optional[int] = None) -> str:
    """A ``Delayq-Signature`` value as the server makes it (``v1`` and ``v2`` per key), for
    tests of a receiver and for relaying pushes onward."""
    t = str(int(time.time()) if timestamp is None else int(timestamp))
    value = f"t={t}"
    for key in _key_list(keys):
        v1 = hmac.new(key, f"{t}.".encode() + bytes(body), hashlib.sha256).hexdigest()
        value += f",v1={v1},v2={_v2(key, t, queue, id, str(attempt), bytes(body))}"
    return value
