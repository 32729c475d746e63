"""Payloads to and from the API's JSON: any JSON value goes as ``payload``, bytes as
``payload_base64``, and each comes back as it was sent (bytes never come back as JSON).
Durations and times have their own module, :mod:`delayq._durations`."""

from __future__ import annotations

import base64
from typing import Any, Dict, Mapping


def payload_fields(payload: Any, prefix: str = "payload") -> Dict[str, Any]:
    """The body fields of a payload: bytes as ``payload_base64``, anything else as JSON in
    ``payload`` (so ``None`` is the JSON ``null``, a payload like any other)."""
    if isinstance(payload, (bytes, bytearray, memoryview)):
        return {f"{prefix}_base64": base64.b64encode(bytes(payload)).decode("ascii")}
    return {prefix: payload}


def payload_of(obj: Mapping[str, Any]) -> Any:
    """The payload of an answer: the JSON value of ``payload``, or the bytes of
    ``payload_base64`` (a message sent as bytes never comes back as JSON)."""
    if "payload_base64" in obj:
        return base64.b64decode(obj["payload_base64"])
    return obj.get("payload")
