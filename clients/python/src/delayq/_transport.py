"""What the sync and async clients share about making a request: headers, timeouts, turning
answers into results or typed errors, and when a failed request is tried again."""

from __future__ import annotations

import datetime as _dt
import random
from dataclasses import dataclass
from typing import Any, Dict, Optional, Union

import httpx

from ._durations import Duration, duration_seconds
from ._ops import NO_BODY, Op, T
from ._version import __version__
from .errors import DelayqError, TransportError, error_from_response

# A duration (a timedelta or text such as "10s") for connect, read, write and pool alike,
# or an httpx.Timeout for each on its own.
TimeoutArg = Union[Duration, httpx.Timeout]

# 503 codes worth another try: Redis did not answer in time (or a proxy said 503 with no
# body of ours). Not redis_full (it fills up, not in a second), not not_replicated (the
# message is written; the caller decides), not newer_data_format (needs an upgrade).
_RETRIED_503 = {"unavailable", "http_503"}


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how soon an idempotent call is tried again after a 503 ``unavailable``
    or a lost connection: ``retries`` more times, waiting ``base_delay`` doubled each time
    up to ``max_delay``, with random jitter so that many clients do not retry in step."""

    retries: int = 4
    base_delay: Duration = _dt.timedelta(milliseconds=200)
    max_delay: Duration = _dt.timedelta(seconds=2)

    def __post_init__(self) -> None:
        duration_seconds(self.base_delay, "RetryPolicy.base_delay")
        duration_seconds(self.max_delay, "RetryPolicy.max_delay")

    def delay(self, retries_done: int) -> float:
        """Seconds to wait before retry number ``retries_done + 1``."""
        base = duration_seconds(self.base_delay, "base_delay")
        ceiling = min(duration_seconds(self.max_delay, "max_delay"), base * (2 ** retries_done))
        return float(ceiling * random.uniform(0.5, 1.0))


NO_RETRY = RetryPolicy(retries=0)


def default_headers(token: Optional[str]) -> Dict[str, str]:
    """Headers of every request: the bearer token, if any, and who is asking."""
    headers = {"user-agent": f"delayq-python/{__version__}"}
    if token:
        headers["authorization"] = f"Bearer {token}"
    return headers


def make_timeout(timeout: TimeoutArg) -> httpx.Timeout:
    """A timeout as httpx takes it (a duration applies to connect, read, write and pool)."""
    if isinstance(timeout, httpx.Timeout):
        return timeout
    return httpx.Timeout(duration_seconds(timeout, "timeout"))


def request_args(op: Op[Any], timeout: httpx.Timeout) -> Dict[str, Any]:
    """The arguments of ``httpx.Client.request`` for ``op``. A long-poll may be held up to
    its wait, so its read timeout is that much longer."""
    args: Dict[str, Any] = {"method": op.method, "url": op.path}
    if op.json is not NO_BODY:
        args["json"] = op.json
    if op.params:
        args["params"] = op.params
    if op.holds_for > 0:
        read = (timeout.read or 0.0) + op.holds_for
        args["timeout"] = httpx.Timeout(
            connect=timeout.connect, read=read, write=timeout.write, pool=timeout.pool
        )
    return args


def result_of(op: Op[T], response: httpx.Response) -> T:
    """The op's result from a 2xx answer; the typed error of any other."""
    if response.is_success:
        return op.parse(response)
    raise error_from_response(response)


def transport_error(exc: httpx.RequestError) -> TransportError:
    """A connection failure as the client's error type."""
    return TransportError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)


def never_sent(exc: httpx.RequestError) -> bool:
    """True when the request surely never reached the server, so any call may be retried."""
    return isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout))


def retry_delay(
    policy: RetryPolicy, op: Op[Any], error: DelayqError, retries_done: int, sent: bool
) -> Optional[float]:
    """Seconds to wait before trying ``op`` again, or None to give up with ``error``.
    ``sent`` is False when the request never left (a refused connection)."""
    if retries_done >= policy.retries:
        return None
    if not sent:
        return policy.delay(retries_done)
    if not op.idempotent:
        return None
    if isinstance(error, TransportError):
        return policy.delay(retries_done)
    if error.status == 503 and error.code in _RETRIED_503:
        return policy.delay(retries_done)
    return None
