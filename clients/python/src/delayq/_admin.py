"""Admin operations (role ``admin``): queues and their stats, pause and resume, dead letters
(list, requeue, purge) and push targets. A queue's settings are in :mod:`delayq._settings`."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

import httpx

from ._durations import Duration, duration_json
from ._ops import Spec, nothing, operation
from .models import DeadLetter, DeadLetterPage, PushTarget, QueueDeleted, QueueStats, RateLimit


def _stats(response: httpx.Response) -> QueueStats:
    return QueueStats.from_json(response.json())


def _stats_list(response: httpx.Response) -> List[QueueStats]:
    return [QueueStats.from_json(q) for q in response.json()["queues"]]


def _dead_page(response: httpx.Response) -> DeadLetterPage:
    obj = response.json()
    return DeadLetterPage(obj["total"], [DeadLetter.from_json(d) for d in obj["dead_letters"]])


def _count(response: httpx.Response) -> int:
    return int(response.json()["count"])


def _push_target(response: httpx.Response) -> PushTarget:
    return PushTarget.from_json(response.json())


@operation("GET /v1/queues")
def list_queues() -> Spec[List[QueueStats]]:
    """Every queue with its counts."""
    return Spec(_stats_list, idempotent=True)


@operation("GET /v1/queues/{queue}")
def stats(queue: str) -> Spec[QueueStats]:
    """One queue's counts (all zero for a queue never used)."""
    return Spec(_stats, {"queue": queue}, idempotent=True)


@operation("PUT /v1/queues/{queue}")
def create_queue(queue: str, partitions: int) -> Spec[QueueStats]:
    """Creates a queue over ``partitions`` (1-256, fixed for its life); the same count again
    is fine, so it is safe to repeat."""
    return Spec(_stats, {"queue": queue}, json={"partitions": partitions}, idempotent=True)


@operation("DELETE /v1/queues/{queue}")
def delete_queue(queue: str, force: bool = False) -> Spec[QueueDeleted]:
    """Deletes the queue: its settings, schedules, events, push target and webhooks.
    Refused with :class:`~delayq.ConflictError` (``queue_not_empty``) while it holds
    messages, unless ``force``, which deletes those too; :class:`~delayq.NotFoundError` for
    a queue never used. Not retried: a repeat would be a 404."""
    params = {"force": "true"} if force else {}
    return Spec(lambda r: QueueDeleted.from_json(r.json()), {"queue": queue}, params=params)


@operation("POST /v1/queues/{queue}/pause")
def pause(queue: str) -> Spec[QueueStats]:
    """No consumer gets a message until :func:`resume`; sends are still taken."""
    return Spec(_stats, {"queue": queue}, idempotent=True)


@operation("POST /v1/queues/{queue}/resume")
def resume(queue: str) -> Spec[QueueStats]:
    """Consumers get messages again at once."""
    return Spec(_stats, {"queue": queue}, idempotent=True)


@operation("GET /v1/queues/{queue}/dead")
def dead_letters(queue: str, offset: int = 0, limit: int = 100) -> Spec[DeadLetterPage]:
    """A page of dead letters, oldest death first."""
    return Spec(_dead_page, {"queue": queue}, params={"offset": offset, "limit": limit},
                idempotent=True)


@operation("POST /v1/queues/{queue}/requeue")
def requeue_dead(queue: str, id: str) -> Spec[int]:
    """One dead letter back to ready, attempts reset (:class:`~delayq.NotFoundError` if
    it is not a dead letter). Not retried: a repeat would be a 404."""
    return Spec(_count, {"queue": queue}, json={"id": id})


@operation("POST /v1/queues/{queue}/requeue")
def requeue_all_dead(queue: str) -> Spec[int]:
    """Every dead letter back to ready; answers how many."""
    return Spec(_count, {"queue": queue}, json={"all": True})


@operation("POST /v1/queues/{queue}/purge")
def purge_dead(queue: str, id: str) -> Spec[int]:
    """Deletes one dead letter."""
    return Spec(_count, {"queue": queue}, json={"id": id})


@operation("POST /v1/queues/{queue}/purge")
def purge_all_dead(queue: str) -> Spec[int]:
    """Deletes every dead letter; answers how many."""
    return Spec(_count, {"queue": queue}, json={"all": True})


@operation("PUT /v1/queues/{queue}/push")
def set_push_target(
    queue: str,
    url: str,
    method: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
    timeout: Optional[Duration] = None,
    concurrency: Optional[int] = None,
    signing_keys: Optional[Sequence[str]] = None,
    dead_statuses: Optional[Sequence[int]] = None,
    failure_callback: Optional[str] = None,
    follow_redirects: Optional[bool] = None,
    rate_limit: Optional[RateLimit] = None,
    allow_message_urls: Optional[Sequence[str]] = None,
) -> Spec[PushTarget]:
    """Pushes the queue's messages to ``url`` (its pull consumers get none meanwhile).
    Without ``signing_keys`` the target keeps its keys, or gets a new random one: read it in
    the answer's ``signing_keys``."""
    body: Dict[str, Any] = {"url": url}
    if timeout is not None:
        body["timeout"] = duration_json(timeout, "timeout")
    optional: Dict[str, Any] = {
        "method": method,
        "headers": dict(headers) if headers is not None else None,
        "concurrency": concurrency,
        "signing_keys": list(signing_keys) if signing_keys is not None else None,
        "dead_statuses": list(dead_statuses) if dead_statuses is not None else None,
        "failure_callback": failure_callback,
        "follow_redirects": follow_redirects,
        "rate_limit": rate_limit.to_json() if rate_limit is not None else None,
        "allow_message_urls": list(allow_message_urls)
        if allow_message_urls is not None else None,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return Spec(_push_target, {"queue": queue}, json=body, idempotent=True)


@operation("GET /v1/queues/{queue}/push")
def get_push_target(queue: str) -> Spec[PushTarget]:
    """The queue's push target (:class:`~delayq.NotFoundError` if it has none)."""
    return Spec(_push_target, {"queue": queue}, idempotent=True)


@operation("DELETE /v1/queues/{queue}/push")
def delete_push_target(queue: str) -> Spec[None]:
    """The queue goes back to pull consumers."""
    return Spec(nothing, {"queue": queue})
