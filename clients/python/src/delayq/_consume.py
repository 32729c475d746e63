"""Consumer operations: receive (one queue or several), ack, nack, extend, release (role
``consume``). A delivery is settled by its receipt on the queue it came from."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import httpx

from ._convert import payload_fields
from ._durations import Duration, duration_json
from ._ops import UNSET, Spec, holds_for, nothing, operation
from .models import Delivery, SettleResult


def _deliveries(response: httpx.Response) -> List[Delivery]:
    return [Delivery.from_json(d) for d in response.json()["deliveries"]]


def _results(response: httpx.Response) -> List[SettleResult]:
    return [SettleResult.from_json(r) for r in response.json()["results"]]


def _deadline(response: httpx.Response) -> int:
    return int(response.json()["lease_deadline_ms"])


def _outcome(response: httpx.Response) -> str:
    return str(response.json()["outcome"])


def _receive_json(max: Optional[int], lease: Optional[Duration],
                  wait: Optional[Duration]) -> Dict[str, Any]:
    body: Dict[str, Any] = {}
    if max is not None:
        body["max"] = max
    if lease is not None:
        body["lease"] = duration_json(lease, "lease")
    if wait is not None:
        body["wait"] = duration_json(wait, "wait")
    return body


@operation("POST /v1/queues/{queue}/receive")
def receive(queue: str, max: Optional[int] = None, lease: Optional[Duration] = None,
            wait: Optional[Duration] = None) -> Spec[List[Delivery]]:
    """Claims up to ``max`` due messages under ``lease``, waiting up to ``wait`` for one to
    come due (a long-poll). Never retried: a claim whose answer was lost would sit unseen
    until its lease ran out."""
    return Spec(_deliveries, {"queue": queue}, json=_receive_json(max, lease, wait),
                holds_for=holds_for(wait))


def _acked_and_received(response: httpx.Response) -> Tuple[List[SettleResult], List[Delivery]]:
    body = response.json()
    acked = [SettleResult.from_json(r) for r in body.get("acked", [])]
    return acked, [Delivery.from_json(d) for d in body["deliveries"]]


@operation("POST /v1/queues/{queue}/receive")
def ack_and_receive(queue: str, receipts: Sequence[str], max: Optional[int] = None,
                    lease: Optional[Duration] = None,
                    wait: Optional[Duration] = None
                    ) -> Spec[Tuple[List[SettleResult], List[Delivery]]]:
    """Acks ``receipts`` (deliveries of ``queue`` this client finished), then receives as
    :func:`receive` does, in one request: the acks never wait for its long poll. Never retried, as a
    receive is not."""
    body = _receive_json(max, lease, wait)
    body["acks"] = list(receipts)
    return Spec(_acked_and_received, {"queue": queue}, json=body,
                holds_for=holds_for(wait))


@operation("POST /v1/receive")
def receive_many(queues: Optional[Sequence[str]] = None,
                 weights: Optional[Mapping[str, int]] = None, max: Optional[int] = None,
                 lease: Optional[Duration] = None,
                 wait: Optional[Duration] = None) -> Spec[List[Delivery]]:
    """One receive over several queues: ``queues`` in strict priority order, or ``weights``
    (queue -> 1..1000). Each delivery names its queue."""
    body = _receive_json(max, lease, wait)
    if queues is not None:
        body["queues"] = list(queues)
    if weights is not None:
        body["weights"] = dict(weights)
    return Spec(_deliveries, json=body,
                holds_for=holds_for(wait))


@operation("POST /v1/queues/{queue}/ack")
def ack(queue: str, receipt: str) -> Spec[None]:
    """Done: the message is gone. :class:`~delayq.LeaseLostError` if its lease was lost."""
    return Spec(nothing, {"queue": queue}, json={"receipt": receipt})


@operation("POST /v1/queues/{queue}/ack")
def ack_many(queue: str, receipts: Sequence[str]) -> Spec[List[SettleResult]]:
    """Acks several deliveries at once; a result each (``ok`` False: lease lost)."""
    return Spec(_results, {"queue": queue}, json={"receipts": list(receipts)})


@operation("POST /v1/queues/{queue}/release")
def release(queue: str, receipt: str) -> Spec[None]:
    """Hands a delivery back, ready at once, its attempt not counted."""
    return Spec(nothing, {"queue": queue}, json={"receipt": receipt})


@operation("POST /v1/queues/{queue}/release")
def release_many(queue: str, receipts: Sequence[str]) -> Spec[List[SettleResult]]:
    """Releases several deliveries at once; a result each."""
    return Spec(_results, {"queue": queue}, json={"receipts": list(receipts)})


def _extend_json(lease: Optional[Duration]) -> Dict[str, Any]:
    return {} if lease is None else {"lease": duration_json(lease, "lease")}


@operation("POST /v1/queues/{queue}/extend")
def extend(queue: str, receipt: str, lease: Optional[Duration] = None) -> Spec[int]:
    """A new lease from now (default 30 s); answers the new deadline (Unix ms). Safe to
    repeat: a second extend sets the same deadline again."""
    return Spec(_deadline, {"queue": queue}, json={"receipt": receipt, **_extend_json(lease)},
                idempotent=True)


@operation("POST /v1/queues/{queue}/extend")
def extend_many(queue: str, receipts: Sequence[str],
                lease: Optional[Duration] = None) -> Spec[List[SettleResult]]:
    """Extends several deliveries at once; a result each, with its new deadline."""
    return Spec(_results, {"queue": queue},
                json={"receipts": list(receipts), **_extend_json(lease)}, idempotent=True)


@operation("POST /v1/queues/{queue}/nack")
def nack(queue: str, receipt: str, error: Optional[str] = None,
         retry_after: Optional[Duration] = None, dead: bool = False, payload: Any = UNSET,
         extra_attempts: Optional[int] = None) -> Spec[str]:
    """A failed attempt: retried by the message's backoff, or after ``retry_after``; a dead
    letter after its last attempt, or at once with ``dead=True`` (a permanent failure).
    ``payload`` replaces the payload of the next attempts; ``extra_attempts`` changes the
    attempts allowed. Answers the outcome: ``retry``, ``dead``, ``expired`` or
    ``superseded``."""
    body: Dict[str, Any] = {"receipt": receipt}
    if error is not None:
        body["error"] = error
    if retry_after is not None:
        body["retry_after"] = duration_json(retry_after, "retry_after")
    if dead:
        body["dead"] = True
    if payload is not UNSET:
        body.update(payload_fields(payload))
    if extra_attempts is not None:
        body["extra_attempts"] = extra_attempts
    return Spec(_outcome, {"queue": queue}, json=body)
