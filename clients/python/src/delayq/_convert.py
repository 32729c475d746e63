"""Python values to and from the API's JSON: durations, points in time and payloads.

The API reads a bare number as milliseconds; Python callers think in seconds (``time.sleep``,
httpx timeouts), so this client takes numbers as seconds and sends milliseconds. Text such as
``"15m"`` goes through unchanged, for the server to parse.
"""

from __future__ import annotations

import base64
import datetime as _dt
from typing import Any, Dict, Mapping, Union

# Seconds (int or float), a timedelta, or the API's text ("250ms", "15m", "1h 30m").
Duration = Union[int, float, _dt.timedelta, str]
# Unix seconds (int or float), an aware datetime, or RFC 3339 text.
Time = Union[int, float, _dt.datetime, str]


def duration_json(value: Duration, field: str) -> Union[int, str]:
    """``value`` as the API takes a duration: milliseconds, or the text as given."""
    if isinstance(value, bool):
        raise TypeError(f"{field}: a duration, not a bool")
    if isinstance(value, str):
        return value
    if isinstance(value, _dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)):
        seconds = float(value)
    else:
        raise TypeError(f"{field}: seconds, a timedelta or text like '15m', not {value!r}")
    if seconds < 0:
        raise ValueError(f"{field}: a duration cannot be negative ({value!r})")
    return int(round(seconds * 1000))


def time_json(value: Time, field: str) -> Union[int, str]:
    """``value`` as the API takes a time: Unix milliseconds, or RFC 3339 text as given. A
    naive datetime is taken as local time, as :meth:`datetime.timestamp` does."""
    if isinstance(value, bool):
        raise TypeError(f"{field}: a time, not a bool")
    if isinstance(value, str):
        return value
    if isinstance(value, _dt.datetime):
        return int(round(value.timestamp() * 1000))
    if isinstance(value, (int, float)):
        return int(round(float(value) * 1000))
    raise TypeError(f"{field}: Unix seconds, a datetime or RFC 3339 text, not {value!r}")


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
