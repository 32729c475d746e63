"""A queue's settings (``PATCH /v1/queues/{queue}``, role ``admin``): every field of the
API's ``QueueSettings`` as a keyword. A setting given changes, all of them or none (a
refused one leaves the others as they were); one left out stays as it is; ``None`` lifts a
limit or stops a recording. The answer is the queue's stats, which show the settings."""

from __future__ import annotations

from typing import Any, Dict, Optional, Union

import httpx

from ._durations import Duration, duration_json
from ._ops import UNSET, Spec, operation
from .models import QueueStats, RateLimit, Retention

__all__ = ["configure", "EventsSetting"]

# True: record events, each partition keeping the default (about 20,000); a number: keep
# about that many (1 to 10,000,000); False or None: stop recording and drop those kept.
EventsSetting = Union[bool, int, None]


def _stats(response: httpx.Response) -> QueueStats:
    return QueueStats.from_json(response.json())


def _events_json(events: EventsSetting) -> Optional[Dict[str, Any]]:
    if events is None or events is False:
        return None
    if events is True:
        return {}
    if isinstance(events, int):
        return {"max": events}
    raise TypeError(f"events: True, a number of entries to keep, or None, not {events!r}")


@operation("PATCH /v1/queues/{queue}")
def configure(
    queue: str,
    idempotency_window: Duration = UNSET,
    rate_limit: Optional[RateLimit] = UNSET,
    default_ttl: Optional[Duration] = UNSET,
    max_delay: Optional[Duration] = UNSET,
    on_expire: str = UNSET,
    group_concurrency: Optional[int] = UNSET,
    group_rate_limit: Optional[RateLimit] = UNSET,
    events: EventsSetting = UNSET,
    retain_completed: Optional[Retention] = UNSET,
) -> Spec[QueueStats]:
    """Changes the settings given. Safe to repeat: the same settings again change nothing.

    - ``idempotency_window``: how long a caller id stays reserved after its message ended
      (``timedelta(0)`` or ``"0s"``: only while it exists; at most 366 days).
    - ``rate_limit``: deliveries a second across every consumer (``None`` lifts it).
    - ``default_ttl``: a message without a deadline of its own is never delivered more than
      this long after it is due (``None`` lifts it).
    - ``max_delay``: sends due further out are refused (``None`` lifts it).
    - ``on_expire``: what an expired message becomes, ``"dead_letter"`` or ``"drop"``.
    - ``group_concurrency``: most messages of one group in flight (1: each group in order;
      ``None`` lifts it). ``group_rate_limit``: each group's own token bucket.
    - ``events``: record an event per change (see :data:`EventsSetting`).
    - ``retain_completed``: keep final records of ended messages (``None`` stops it).
    """
    body: Dict[str, Any] = {}
    if idempotency_window is not UNSET:
        body["idempotency_window"] = duration_json(idempotency_window, "idempotency_window")
    for name, value in (("rate_limit", rate_limit), ("group_rate_limit", group_rate_limit)):
        if value is not UNSET:
            body[name] = None if value is None else value.to_json()
    for name, span in (("default_ttl", default_ttl), ("max_delay", max_delay)):
        if span is not UNSET:
            body[name] = None if span is None else duration_json(span, name)
    if on_expire is not UNSET:
        body["on_expire"] = on_expire
    if group_concurrency is not UNSET:
        body["group_concurrency"] = group_concurrency
    if events is not UNSET:
        body["events"] = _events_json(events)
    if retain_completed is not UNSET:
        body["retain_completed"] = None if retain_completed is None else retain_completed.to_json()
    return Spec(_stats, {"queue": queue}, json=body, idempotent=True)
