"""A queue's event webhooks (role ``admin``): URLs every server calls with the queue's events
of the kinds each names, signed with the queue's webhook keys (check them with
:func:`delayq.verify_webhook`). Setting webhooks turns the queue's events on. See
``docs/events.md``, "Webhooks"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

import httpx

from ._ops import Spec, nothing, operation

__all__ = ["Webhook", "Webhooks", "set_webhooks", "get_webhooks", "delete_webhooks"]


@dataclass(frozen=True)
class Webhook:
    """A URL (``http://`` or ``https://``) and the kinds of events it is sent (empty: every
    kind)."""

    url: str
    kinds: Sequence[str] = ()

    def to_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"url": self.url}
        if self.kinds:
            body["kinds"] = list(self.kinds)
        return body


@dataclass(frozen=True)
class Webhooks:
    """A queue's webhooks, the keys their requests are signed with, and about how many
    events each partition keeps (a webhook further behind misses some)."""

    webhooks: List[Webhook]
    signing_keys: List[str]
    events_max: Optional[int]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Webhooks":
        hooks = [Webhook(h["url"], tuple(h.get("kinds") or ())) for h in obj["webhooks"]]
        return cls(hooks, list(obj["signing_keys"]), obj.get("events_max"), obj)


def _webhooks(response: httpx.Response) -> Webhooks:
    return Webhooks.from_json(response.json())


@operation("PUT /v1/queues/{queue}/webhooks")
def set_webhooks(queue: str, webhooks: Sequence[Webhook],
                 signing_keys: Optional[Sequence[str]] = None) -> Spec[Webhooks]:
    """Sets the queue's webhooks (at most 10) in place of those it has. Without
    ``signing_keys`` (16-256 characters each; two while rotating) the queue keeps its keys,
    or gets a new random one: read it in the answer. Safe to repeat."""
    body: Dict[str, Any] = {"webhooks": [w.to_json() for w in webhooks]}
    if signing_keys is not None:
        body["signing_keys"] = list(signing_keys)
    return Spec(_webhooks, {"queue": queue}, json=body, idempotent=True)


@operation("GET /v1/queues/{queue}/webhooks")
def get_webhooks(queue: str) -> Spec[Webhooks]:
    """The queue's webhooks and signing keys (:class:`~delayq.NotFoundError` if none)."""
    return Spec(_webhooks, {"queue": queue}, idempotent=True)


@operation("DELETE /v1/queues/{queue}/webhooks")
def delete_webhooks(queue: str) -> Spec[None]:
    """Removes every webhook of the queue."""
    return Spec(nothing, {"queue": queue})
