"""Producer operations: send, send a batch, get, cancel (one or many), reschedule (role
``send``)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Union

import httpx

from ._durations import Duration, Time, duration_json, time_json
from ._ops import Spec, operation
from .models import CancelMany, CancelResult, Message, NewMessage, Sent


def _sent(response: httpx.Response) -> Sent:
    return Sent.from_json(response.json())


def _sent_list(response: httpx.Response) -> List[Sent]:
    return [Sent.from_json(r) for r in response.json()["results"]]


def _message(response: httpx.Response) -> Message:
    return Message.from_json(response.json())


def _due_ms(response: httpx.Response) -> int:
    return int(response.json()["due_ms"])


def _cancelled_state(response: httpx.Response) -> str:
    return str(response.json()["state"])


@operation("POST /v1/queues/{queue}/messages")
def send(queue: str, message: NewMessage) -> Spec[Sent]:
    """One message (JSON body; bytes go base64). With a caller id and ``on_duplicate`` keep,
    a repeat is answered as a duplicate and writes nothing: such a send is retried."""
    return Spec(_sent, {"queue": queue}, json=message.to_json(),
                idempotent=message.safe_to_repeat)


@operation("POST /v1/queues/{queue}/batch")
def send_batch(queue: str, messages: Sequence[Union[NewMessage, Any]]) -> Spec[List[Sent]]:
    """Up to the server's batch limit, all or nothing; plain values are payloads without
    options. Retried only when every message is safe to repeat."""
    items = [m if isinstance(m, NewMessage) else NewMessage(m) for m in messages]
    return Spec(_sent_list, {"queue": queue},
                json={"messages": [m.to_json() for m in items]},
                idempotent=bool(items) and all(m.safe_to_repeat for m in items))


@operation("GET /v1/queues/{queue}/messages/{id}")
def get(queue: str, id: str) -> Spec[Message]:
    """A message by id, in whatever state it is."""
    return Spec(_message, {"queue": queue, "id": id}, idempotent=True)


@operation("DELETE /v1/queues/{queue}/messages/{id}")
def cancel(queue: str, id: str) -> Spec[str]:
    """Removes a delayed or ready message and answers the state it was in. Not retried: a
    repeat of a cancel that worked would be a 404."""
    return Spec(_cancelled_state, {"queue": queue, "id": id})


def _cancel_results(response: httpx.Response) -> CancelMany:
    body = response.json()
    return CancelMany(cancelled=int(body["cancelled"]),
                      results=[CancelResult(id=r["id"], outcome=r["outcome"], state=r.get("state"))
                               for r in body["results"]])


@operation("POST /v1/queues/{queue}/cancel")
def cancel_many(queue: str, ids: Sequence[str]) -> Spec[CancelMany]:
    """Cancels many messages by id in one request (up to the server's batch limit), each its
    own atomic cancel; answers what became of each, in order. Not retried: a repeat would say
    not found."""
    return Spec(_cancel_results, {"queue": queue}, json={"ids": list(ids)})


def schedule_json(delay: Optional[Duration], deliver_at: Optional[Time]) -> Dict[str, Any]:
    """``{"delay"}`` or ``{"deliver_at"}`` (the server refuses both)."""
    body: Dict[str, Any] = {}
    if delay is not None:
        body["delay"] = duration_json(delay, "delay")
    if deliver_at is not None:
        body["deliver_at"] = time_json(deliver_at, "deliver_at")
    return body


@operation("POST /v1/queues/{queue}/messages/{id}/reschedule")
def reschedule(queue: str, id: str, delay: Optional[Duration] = None,
               deliver_at: Optional[Time] = None) -> Spec[int]:
    """A new due time for a delayed or ready message; answers it (Unix ms). A fixed
    ``deliver_at`` is safe to repeat, a relative ``delay`` is not (it would move again)."""
    return Spec(_due_ms, {"queue": queue, "id": id}, json=schedule_json(delay, deliver_at),
                idempotent=delay is None and deliver_at is not None)


__all__ = ["send", "send_batch", "get", "cancel", "cancel_many", "reschedule"]
