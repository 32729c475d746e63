"""What the client sends and what it gets back, as typed objects.

Answers keep the server's JSON in ``raw`` too, so a field added to the server is readable
before this client names it. Times are Unix milliseconds, as the API gives them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ._convert import payload_fields, payload_of
from ._durations import Duration, Time, duration_json, time_json

__all__ = [
    "RateLimit",
    "Retention",
    "Backoff",
    "NewMessage",
    "Sent",
    "CancelResult",
    "CancelMany",
    "FailedAttempt",
    "Message",
    "Delivery",
    "SettleResult",
    "QueueStats",
    "DeadLetter",
    "DeadLetterPage",
    "PushTarget",
]


@dataclass(frozen=True)
class RateLimit:
    """At most ``per_second`` deliveries a second, ``burst`` at once after a quiet spell
    (default 1: evenly paced)."""

    per_second: int
    burst: Optional[int] = None

    def to_json(self) -> Dict[str, Any]:
        body: Dict[str, Any] = {"per_second": self.per_second}
        if self.burst is not None:
            body["burst"] = self.burst
        return body

    @classmethod
    def from_json(cls, obj: Optional[Mapping[str, Any]]) -> Optional["RateLimit"]:
        return None if obj is None else cls(int(obj["per_second"]), obj.get("burst"))


@dataclass(frozen=True)
class Retention:
    """Keep the final record of each message that ends for ``keep_for`` (1 s to 366 days),
    at most ``max`` per partition."""

    keep_for: Duration
    max: int

    def to_json(self) -> Dict[str, Any]:
        return {"keep_for": duration_json(self.keep_for, "retain_completed.keep_for"),
                "max": self.max}


@dataclass(frozen=True)
class Backoff:
    """A retry policy; build one with :meth:`fixed`, :meth:`exponential`, :meth:`linear` or
    :meth:`steps`."""

    body: Dict[str, Any]

    @staticmethod
    def _jitter(inner: Dict[str, Any], jitter_percent: Optional[int]) -> Dict[str, Any]:
        if jitter_percent is not None:
            inner["jitter_percent"] = jitter_percent
        return inner

    @classmethod
    def fixed(cls, delay: Duration, jitter_percent: Optional[int] = None) -> "Backoff":
        """The same delay before every retry."""
        inner = {"delay": duration_json(delay, "backoff.delay")}
        return cls({"fixed": cls._jitter(inner, jitter_percent)})

    @classmethod
    def exponential(
        cls,
        base: Duration,
        cap: Duration,
        factor: Optional[int] = None,
        jitter_percent: Optional[int] = None,
    ) -> "Backoff":
        """``base``, then times ``factor`` (default 2) per retry, up to ``cap``."""
        inner: Dict[str, Any] = {
            "base": duration_json(base, "backoff.base"),
            "cap": duration_json(cap, "backoff.cap"),
        }
        if factor is not None:
            inner["factor"] = factor
        return cls({"exponential": cls._jitter(inner, jitter_percent)})

    @classmethod
    def linear(
        cls, base: Duration, cap: Duration, jitter_percent: Optional[int] = None
    ) -> "Backoff":
        """``base``, growing by ``base`` per retry, up to ``cap``."""
        inner = {
            "base": duration_json(base, "backoff.base"),
            "cap": duration_json(cap, "backoff.cap"),
        }
        return cls({"linear": cls._jitter(inner, jitter_percent)})

    @classmethod
    def steps(cls, delays: Sequence[Duration], jitter_percent: Optional[int] = None) -> "Backoff":
        """The listed delays in turn (1 to 8); the last one repeats."""
        inner = {"delays": [duration_json(d, "backoff.delays") for d in delays]}
        return cls({"list": cls._jitter(inner, jitter_percent)})


@dataclass
class NewMessage:
    """One message to send: its payload (any JSON value, or ``bytes``) and every option the
    API's send takes. Durations are a timedelta or text (``"15m"``); times an aware datetime
    or RFC 3339 text; a bare number is refused (see the README's "Durations and times")."""

    payload: Any
    delay: Optional[Duration] = None
    deliver_at: Optional[Time] = None
    id: Optional[str] = None
    priority: Optional[int] = None
    max_attempts: Optional[int] = None
    backoff: Optional[Backoff] = None
    ttl: Optional[Duration] = None
    expires_at: Optional[Time] = None
    group: Optional[str] = None
    on_duplicate: Optional[str] = None
    max_wait: Optional[Duration] = None
    if_in_flight: Optional[str] = None
    handler_timeout: Optional[Duration] = None
    replicas: Optional[int] = None
    replicas_timeout: Optional[Duration] = None
    push_url: Optional[str] = None
    push_headers: Optional[Mapping[str, str]] = None
    traceparent: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        """The ``SendBody`` of the API: only the options given."""
        body: Dict[str, Any] = payload_fields(self.payload)
        for name in ("delay", "ttl", "max_wait", "handler_timeout"):
            value = getattr(self, name)
            if value is not None:
                body[name] = duration_json(value, name)
        for name in ("deliver_at", "expires_at"):
            value = getattr(self, name)
            if value is not None:
                body[name] = time_json(value, name)
        for name in ("id", "priority", "max_attempts", "group", "on_duplicate",
                     "if_in_flight", "traceparent"):
            value = getattr(self, name)
            if value is not None:
                body[name] = value
        if self.backoff is not None:
            body["backoff"] = self.backoff.body
        if self.replicas is not None:
            replicas: Dict[str, Any] = {"count": self.replicas}
            if self.replicas_timeout is not None:
                replicas["timeout"] = duration_json(self.replicas_timeout, "replicas_timeout")
            body["replicas"] = replicas
        if self.push_url is not None or self.push_headers:
            push: Dict[str, Any] = {}
            if self.push_url is not None:
                push["url"] = self.push_url
            if self.push_headers:
                push["headers"] = dict(self.push_headers)
            body["push"] = push
        return body

    @property
    def safe_to_repeat(self) -> bool:
        """True when sending it twice writes it once: it has a caller id and keeps an
        existing message of that id (the default), so a retry is answered as a duplicate."""
        return self.id is not None and self.on_duplicate in (None, "keep")


@dataclass(frozen=True)
class Sent:
    """A send's result. ``duplicate``: a message with this caller id existed, nothing was
    written. ``replaced``: an upsert's predecessor's state."""

    id: str
    due_ms: Optional[int]
    duplicate: bool
    replaced: Optional[str] = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "Sent":
        return cls(obj["id"], obj.get("due_ms"), bool(obj.get("duplicate")), obj.get("replaced"))


@dataclass(frozen=True)
class CancelResult:
    """What a bulk cancel did with one id: ``outcome`` is ``cancelled``, ``not_cancelled``
    (in flight or dead: left alone) or ``not_found``; ``state`` the state it was in."""

    id: str
    outcome: str
    state: Optional[str] = None


@dataclass(frozen=True)
class CancelMany:
    """A bulk cancel's answer: how many were cancelled, and each id's result in order."""

    cancelled: int
    results: List[CancelResult]


@dataclass(frozen=True)
class FailedAttempt:
    """One failed attempt in a message's history."""

    attempt: int
    at_ms: int
    error: str


def _errors(obj: Mapping[str, Any]) -> List[FailedAttempt]:
    return [FailedAttempt(e["attempt"], e["at_ms"], e["error"]) for e in obj.get("errors", [])]


@dataclass(frozen=True)
class Message:
    """A message as ``get`` shows it (``state``: delayed, ready, in_flight, dead or
    completed)."""

    id: str
    state: str
    due_ms: int
    attempts: int
    max_attempts: int
    priority: int
    payload: Any
    last_error: Optional[str]
    errors: List[FailedAttempt]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Message":
        return cls(
            obj["id"], obj["state"], obj["due_ms"], obj["attempts"], obj["max_attempts"],
            obj["priority"], payload_of(obj), obj.get("last_error"), _errors(obj), obj,
        )


@dataclass(frozen=True)
class Delivery:
    """A message handed to this consumer under a lease; settle it by ``receipt`` on its
    ``queue`` (ack, nack, extend, release)."""

    queue: str
    receipt: str
    id: str
    attempt: int
    priority: int
    due_ms: int
    lease_deadline_ms: int
    payload: Any
    group: Optional[str] = None
    handler_timeout_ms: Optional[int] = None
    traceparent: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "Delivery":
        return cls(
            obj["queue"], obj["receipt"], obj["id"], obj["attempt"], obj["priority"],
            obj["due_ms"], obj["lease_deadline_ms"], payload_of(obj), obj.get("group"),
            obj.get("handler_timeout_ms"), obj.get("traceparent"), obj,
        )


@dataclass(frozen=True)
class SettleResult:
    """One receipt's result in a many-receipt ack, release or extend: ``ok`` False means its
    lease was lost. ``lease_deadline_ms``: extend's new deadline."""

    receipt: str
    ok: bool
    lease_deadline_ms: Optional[int] = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> "SettleResult":
        return cls(obj["receipt"], bool(obj["ok"]), obj.get("lease_deadline_ms"))


@dataclass(frozen=True)
class QueueStats:
    """A queue's counts and settings (``raw`` has every field the server gives)."""

    name: str
    delayed: int
    ready: int
    in_flight: int
    dead: int
    paused: bool
    partitions: int
    oldest_ready_lag_ms: int
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "QueueStats":
        return cls(
            obj["name"], obj["delayed"], obj["ready"], obj["in_flight"], obj["dead"],
            bool(obj["paused"]), obj["partitions"], obj["oldest_ready_lag_ms"], obj,
        )

    @property
    def rate_limit(self) -> Optional[RateLimit]:
        """The queue's rate limit, if it has one."""
        return RateLimit.from_json(self.raw.get("rate_limit"))

    @property
    def group_concurrency(self) -> Optional[int]:
        """At most this many messages of one group in flight (None: no limit)."""
        value = self.raw.get("group_concurrency")
        return None if value is None else int(value)

    @property
    def group_rate_limit(self) -> Optional[RateLimit]:
        """Each group's rate limit, unless it has its own."""
        return RateLimit.from_json(self.raw.get("group_rate_limit"))

    @property
    def events_max(self) -> Optional[int]:
        """About how many events each partition keeps (None: the queue records none)."""
        value = self.raw.get("events_max")
        return None if value is None else int(value)

    @property
    def overdue(self) -> int:
        """Of ``in_flight``, held past their lease (their consumer died or stalled)."""
        return int(self.raw.get("overdue", 0))

    @property
    def oldest_overdue_ms(self) -> int:
        """How long ago the oldest overdue lease ended, in ms (0: none)."""
        return int(self.raw.get("oldest_overdue_ms", 0))


@dataclass(frozen=True)
class QueueDeleted:
    """What a queue's delete did: messages deleted with it (0 unless forced), Redis keys
    deleted, and whether a message sent meanwhile started the queue again."""

    queue: str
    messages: int
    keys: int
    raced: bool

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "QueueDeleted":
        return cls(obj["queue"], obj["messages"], obj["keys"], bool(obj["raced"]))


@dataclass(frozen=True)
class DeadLetter:
    """A message that ran out of attempts or failed permanently."""

    id: str
    died_at_ms: int
    attempts: int
    max_attempts: int
    priority: int
    last_error: Optional[str]
    errors: List[FailedAttempt]
    payload: Any
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "DeadLetter":
        return cls(
            obj["id"], obj["died_at_ms"], obj["attempts"], obj["max_attempts"], obj["priority"],
            obj.get("last_error"), _errors(obj), payload_of(obj), obj,
        )


@dataclass(frozen=True)
class DeadLetterPage:
    """A page of dead letters, oldest death first, and how many there are in all."""

    total: int
    items: List[DeadLetter]


@dataclass(frozen=True)
class PushTarget:
    """A queue's push target; ``signing_keys`` verify its requests' signatures."""

    url: str
    method: str
    headers: Dict[str, str]
    timeout_ms: int
    concurrency: int
    signing_keys: List[str]
    raw: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, obj: Dict[str, Any]) -> "PushTarget":
        return cls(
            obj["url"], obj["method"], dict(obj.get("headers") or {}), obj["timeout_ms"],
            obj["concurrency"], list(obj["signing_keys"]), obj,
        )
