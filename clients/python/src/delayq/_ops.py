"""The API's operations, described once for the sync and the async client alike.

Each builder (in ``_produce``, ``_consume``, ``_admin``, ``_settings``, ``_schedules``,
``_groups``, ``_events``, ``_webhooks`` and here) turns a call's arguments
into an :class:`Op`: the route, the request and how to read the answer. Neither client knows
any path: they only run ops. The ``@operation("METHOD /path")`` decorator records which
client method covers which route in :data:`COVERED`, the mapping the OpenAPI coverage test
checks against the server's document (see :mod:`delayq.routes`).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Generic, List, Optional, TypeVar
from urllib.parse import quote

import httpx

from ._durations import Duration, duration_seconds

T = TypeVar("T")

# Route ("METHOD /path/{param}") -> the names of the client methods that call it.
COVERED: Dict[str, List[str]] = {}

# Marks "no request body" (None is the JSON null, a body like any other).
NO_BODY: Any = object()


class _Unset:
    """The type of :data:`UNSET`."""

    def __repr__(self) -> str:
        return "UNSET"


# Marks an optional argument left out where None means something (a JSON null payload).
UNSET: Any = _Unset()


@dataclass(frozen=True)
class Op(Generic[T]):
    """One request to make and how to read its answer."""

    route: str
    path: str
    parse: Callable[[httpx.Response], T]
    json: Any = NO_BODY
    params: Optional[Dict[str, Any]] = None
    # Safe to send again after a 503 or a lost answer: it changes nothing the second time.
    idempotent: bool = False
    # Seconds the server may hold the request before answering (a long-poll's wait).
    holds_for: float = 0.0

    @property
    def method(self) -> str:
        return self.route.split(" ", 1)[0]


@dataclass(frozen=True)
class Spec(Generic[T]):
    """What a builder returns: an :class:`Op` short of its route, which ``@operation``
    supplies so that each route is written once."""

    parse: Callable[[httpx.Response], T]
    path_params: Dict[str, str] = field(default_factory=dict)
    json: Any = NO_BODY
    params: Optional[Dict[str, Any]] = None
    idempotent: bool = False
    holds_for: float = 0.0


_PARAM = re.compile(r"\{(\w+)\}")


def operation(route: str) -> Callable[[Callable[..., Spec[T]]], Callable[..., Op[T]]]:
    """Registers the decorated builder as the client method of ``route``; the builder's
    name is the method's name on both clients."""

    def wrap(build: Callable[..., Spec[T]]) -> Callable[..., Op[T]]:
        COVERED.setdefault(route, []).append(build.__name__)
        template = route.split(" ", 1)[1]

        @functools.wraps(build)
        def make(*args: Any, **kwargs: Any) -> Op[T]:
            spec = build(*args, **kwargs)
            # Every segment is percent-encoded whole: ids may hold '/', ':' and '@'.
            path = _PARAM.sub(lambda m: quote(spec.path_params[m.group(1)], safe=""), template)
            return Op(route, path, spec.parse, spec.json, spec.params, spec.idempotent,
                      spec.holds_for)

        return make

    return wrap


def json_of(response: httpx.Response) -> Any:
    """The answer's JSON."""
    return response.json()


def nothing(response: httpx.Response) -> None:
    """For answers with nothing to read (204)."""
    return None


def ok(response: httpx.Response) -> bool:
    """For probes: any 2xx is True (errors raise before this is called)."""
    return True


@operation("GET /healthz")
def health() -> Spec[bool]:
    """The server process is up."""
    return Spec(ok, idempotent=True)


@operation("GET /readyz")
def ready() -> Spec[bool]:
    """The server's Redis answers."""
    return Spec(ok, idempotent=True)


def holds_for(wait: Optional[Duration]) -> float:
    """Seconds a long-poll with ``wait`` may be held by the server before it answers."""
    return 0.0 if wait is None else duration_seconds(wait, "wait")
