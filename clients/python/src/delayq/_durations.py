"""Durations and points in time as this client takes them: one rule, checked before any
request.

- A **duration** is a :class:`datetime.timedelta` (sent as whole milliseconds) or text with
  its units, as the server reads it (``"250ms"``, ``"2s"``, ``"1m30s"``, ``"15m"``,
  ``"1h 30m"``, ``"7d"``; sent as written). A bare number is refused with a
  :class:`TypeError` that names the fix: the HTTP API reads ``2`` as 2 milliseconds, Python
  code means 2 seconds, and a client must not pick one silently.
- A **time** is an aware :class:`datetime.datetime` (sent as Unix milliseconds) or RFC 3339
  text with an offset (sent as written). A naive datetime (which zone?) and a bare number
  (seconds or milliseconds since the epoch?) are refused.

Text is checked here with a port of the server's own parser (the ``humantime`` crate's
``parse_duration``; RFC 3339 as ``chrono`` reads it), so a typo fails at the call, with the
field's name, rather than as a 400 from the server.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Dict, Iterator, Optional, Tuple, Union

__all__ = ["Duration", "Time", "parse_duration", "duration_json", "duration_ms",
           "duration_seconds", "time_json"]

# A timedelta, or the API's text ("250ms", "2s", "1m30s", "15m", "1h 30m").
Duration = Union[_dt.timedelta, str]
# An aware datetime, or RFC 3339 text ("2030-01-01T10:00:00Z").
Time = Union[_dt.datetime, str]

_NS = 1_000_000_000
_UNITS: Dict[str, int] = {}
for _names, _ns in (
    (("nanos", "nsec", "ns"), 1),
    (("usec", "us", "µs"), 1_000),
    (("millis", "msec", "ms"), 1_000_000),
    (("seconds", "second", "secs", "sec", "s"), _NS),
    (("minutes", "minute", "min", "mins", "m"), 60 * _NS),
    (("hours", "hour", "hr", "hrs", "h"), 3_600 * _NS),
    (("days", "day", "d"), 86_400 * _NS),
    (("weeks", "week", "wk", "wks", "w"), 7 * 86_400 * _NS),
    (("months", "month", "M"), 2_630_016 * _NS),  # 30.44 days
    (("years", "year", "yr", "yrs", "y"), 31_557_600 * _NS),  # 365.25 days
):
    for _name in _names:
        _UNITS[_name] = _ns

_U64 = 2 ** 64
_EXAMPLES = "'250ms', '2s', '1m30s', '15m', '1h 30m'"


def _letter(c: str) -> bool:
    return ("a" <= c <= "z") or ("A" <= c <= "Z") or c == "µ"


class _Parser:
    """humantime's ``parse_duration``, character for character: spans of a number (digits,
    maybe a fraction, spaces allowed between digits) and a unit, concatenated."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.chars: Iterator[Tuple[int, str]] = iter(enumerate(text))
        self.pos = 0  # offset of the next character

    def next(self) -> Optional[str]:
        for i, c in self.chars:
            self.pos = i + 1
            return c
        self.pos = len(self.text)
        return None

    def first_digit(self) -> Optional[int]:
        while True:
            at = self.pos
            c = self.next()
            if c is None:
                return None
            if c.isdigit() and c.isascii():
                return int(c)
            if not c.isspace():
                raise ValueError(f"expected a number at {at}")

    def fraction(self) -> Tuple[int, int, Optional[str], int]:
        """The digits after a '.': (numerator, denominator, the letter that ended them or
        None, its offset)."""
        numerator, denominator = 0, 1
        while True:
            at = self.pos
            c = self.next()
            if c is None:
                end: Tuple[Optional[str], int] = (None, self.pos)
                break
            if c.isascii() and c.isdigit():
                numerator, denominator = numerator * 10 + int(c), denominator * 10
            elif _letter(c):
                end = (c, at)
                break
            elif not c.isspace():
                raise ValueError(f"invalid character at {at}")
        if denominator == 1:
            raise ValueError("no digits after the decimal point")
        return numerator, denominator, end[0], end[1]

    def parse(self) -> int:
        """Nanoseconds."""
        if self.text == "0":
            return 0
        n = self.first_digit()
        if n is None:
            raise ValueError("it is empty")
        total = 0
        while True:
            frac: Optional[Tuple[int, int]] = None
            start = None
            while True:
                at = self.pos
                c = self.next()
                if c is None:
                    break
                if c.isascii() and c.isdigit():
                    n = n * 10 + int(c)
                    if n >= _U64:
                        raise ValueError("the number is too large")
                elif c.isspace():
                    continue
                elif _letter(c):
                    start = at
                    break
                elif c == ".":
                    num, den, letter, letter_at = self.fraction()
                    frac = (num, den)
                    start = letter_at if letter is not None else None
                    break
                else:
                    raise ValueError(f"invalid character {c!r} at {at}")
            if start is None:
                raise ValueError(f"time unit needed, for example {n}s or {n}ms")
            restart: Optional[int] = None
            while True:
                at = self.pos
                c = self.next()
                if c is None:
                    end = self.pos
                    break
                if c.isascii() and c.isdigit():
                    end, restart = at, int(c)
                    break
                if c.isspace():
                    end = at
                    break
                if not _letter(c):
                    raise ValueError(f"invalid character {c!r} at {at}")
            total += self.span(n, frac, self.text[start:end])
            if restart is not None:
                n = restart
                continue
            following = self.first_digit()
            if following is None:
                return total
            n = following

    @staticmethod
    def span(n: int, frac: Optional[Tuple[int, int]], unit: str) -> int:
        """Nanoseconds of ``n[.frac] unit``; a fraction must come out whole (nanoseconds
        below an hour, seconds from an hour up), as humantime requires."""
        if unit not in _UNITS:
            raise ValueError(f"unknown time unit {unit!r} (ns, us, ms, s, m, h, d, w, M, y "
                             "and their long names)")
        per = _UNITS[unit]
        total = n * per
        if frac is not None:
            num, den = frac
            if per == 1:
                raise ValueError("a fraction of a nanosecond")
            step = _NS if per >= 3_600 * _NS else 1
            scaled = num * (per // step)
            if scaled % den:
                raise ValueError(f"{n}.{num} {unit} is finer than this unit allows")
            total += scaled // den * step
        return total


def _nanoseconds(text: str, field: str) -> int:
    try:
        return _Parser(text).parse()
    except ValueError as exc:
        raise ValueError(f"{field}: {text!r} is not a duration ({exc}); give text with units "
                         f"such as {_EXAMPLES}, or a timedelta") from None


def parse_duration(value: Duration) -> _dt.timedelta:
    """A duration as a timedelta: text read as the server reads it (``"1h 30m"``,
    ``"250ms"``; to the microsecond), a timedelta as it is. :class:`ValueError` for text that
    is not a duration or a negative timedelta, :class:`TypeError` for a bare number."""
    checked = _checked(value, "duration")
    if isinstance(checked, str):
        return _dt.timedelta(microseconds=_nanoseconds(checked, "duration") // 1_000)
    return checked


def _bare_number(value: object, field: str, kind: str) -> TypeError:
    if kind == "time":
        return TypeError(
            f"{field}: a bare number ({value!r}) is not taken as a time (Unix seconds or "
            "milliseconds?); give an aware datetime, e.g. datetime.now(timezone.utc) + "
            "timedelta(minutes=15), or RFC 3339 text such as '2030-01-01T10:00:00Z'")
    return TypeError(
        f"{field}: a bare number ({value!r}) is not taken as a duration (the HTTP API reads "
        f"it as milliseconds, Python as seconds); give timedelta(seconds={value!r}) or "
        f"'{value!r}s' (or '{value!r}ms' if you meant milliseconds)")


def _checked(value: object, field: str) -> Union[_dt.timedelta, str]:
    if isinstance(value, bool):
        raise TypeError(f"{field}: {value!r} is not a duration; give a timedelta or text "
                        f"such as {_EXAMPLES}")
    if isinstance(value, (int, float)):
        raise _bare_number(value, field, "duration")
    if isinstance(value, _dt.timedelta):
        if value < _dt.timedelta(0):
            raise ValueError(f"{field}: a duration cannot be negative ({value!r})")
        return value
    if isinstance(value, str):
        _nanoseconds(value, field)
        return value
    raise TypeError(f"{field}: a timedelta or text such as {_EXAMPLES}, not {value!r}")


def duration_json(value: Duration, field: str) -> Union[int, str]:
    """``value`` as the API takes a duration: a timedelta as whole milliseconds (rounded),
    text as written (checked first)."""
    checked = _checked(value, field)
    if isinstance(checked, str):
        return checked
    return int((checked + _dt.timedelta(microseconds=500)) // _dt.timedelta(milliseconds=1))


def duration_ms(value: Duration, field: str) -> int:
    """Whole milliseconds of ``value`` (text cut as the server cuts it), for the API's
    ``..._ms`` query parameters."""
    checked = _checked(value, field)
    if isinstance(checked, str):
        return _nanoseconds(checked, field) // 1_000_000
    return int((checked + _dt.timedelta(microseconds=500)) // _dt.timedelta(milliseconds=1))


def duration_seconds(value: Duration, field: str) -> float:
    """Seconds of ``value``, for this process's own waits and timeouts."""
    checked = _checked(value, field)
    if isinstance(checked, str):
        return _nanoseconds(checked, field) / _NS
    return checked.total_seconds()


# RFC 3339 as chrono's parse_from_rfc3339 takes it: 'T', 't' or a space between date and
# time, any fraction of a second, and an offset ('Z' or +hh:mm), which is required.
_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
    r"(?:([Zz])|([+-])(\d{2}):(\d{2}))")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


def _rfc3339(text: str, field: str) -> None:
    """Raises :class:`ValueError` unless ``text`` is an RFC 3339 time the server takes."""
    m = _RFC3339.fullmatch(text.strip())
    problem = "" if m else "not RFC 3339 with an offset"
    if m:
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        try:
            offset = _dt.timedelta(0)
            if not m.group(8):
                sign = -1 if m.group(9) == "-" else 1
                offset = sign * _dt.timedelta(hours=int(m.group(10)), minutes=int(m.group(11)))
            at = _dt.datetime(year, month, day, hour, minute, min(second, 59),
                              tzinfo=_dt.timezone(offset))
            if at < _EPOCH:
                problem = "before 1970-01-01T00:00:00Z"
        except ValueError as exc:
            problem = str(exc)
    if problem:
        raise ValueError(f"{field}: {text!r} is not a time the server takes ({problem}); give "
                         "RFC 3339 text with an offset, such as '2030-01-01T10:00:00Z' or "
                         "'2030-01-01T10:00:00.5+05:45', or an aware datetime")


def time_json(value: Time, field: str) -> Union[int, str]:
    """``value`` as the API takes a time: an aware datetime as Unix milliseconds, RFC 3339
    text as written (checked first)."""
    if isinstance(value, bool):
        raise TypeError(f"{field}: {value!r} is not a time; give an aware datetime or RFC "
                        "3339 text")
    if isinstance(value, (int, float)):
        raise _bare_number(value, field, "time")
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(
                f"{field}: a naive datetime ({value.isoformat()}) has no time zone; give an "
                "aware one, e.g. datetime.now(timezone.utc) + timedelta(minutes=15) or "
                "datetime(2030, 1, 1, 10, tzinfo=timezone.utc), or RFC 3339 text")
        if value < _EPOCH:
            raise ValueError(f"{field}: {value.isoformat()} is before 1970")
        return int((value - _EPOCH) // _dt.timedelta(milliseconds=1))
    if isinstance(value, str):
        _rfc3339(value, field)
        return value
    raise TypeError(f"{field}: an aware datetime or RFC 3339 text, not {value!r}")
