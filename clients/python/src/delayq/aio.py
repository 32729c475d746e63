"""The asyncio client: the methods of :class:`delayq.Client`, with the same signatures, as
coroutines over one ``httpx.AsyncClient`` (``follow_events`` is an async iterator). The ops
they run and the retry rules are the sync client's (``_ops``, ``_transport``); only the
waiting differs. An async worker's long poll is a task, which its stop cancels."""

from __future__ import annotations

import asyncio
from contextvars import ContextVar
from types import TracebackType
from typing import Any, AsyncIterator, List, Mapping, Optional, Sequence, Tuple, Type, Union

import httpx

from . import _admin, _consume, _events, _groups, _ops, _produce, _schedules, _settings
from . import _webhooks
from ._durations import Duration, Time
from ._events import Event, EventPage
from ._groups import Group, GroupPage
from ._ops import UNSET, Op, T
from ._pollcut import PollLine
from ._schedules import Backfill, Schedule
from ._settings import EventsSetting
from ._transport import (
    RetryPolicy, TimeoutArg, default_headers, make_timeout, never_sent, request_args,
    result_of, retry_delay, transport_error,
)
from ._webhooks import Webhook, Webhooks
from .client import DEFAULT_TIMEOUT, DEFAULT_URL, FOLLOW_WAIT, http_options_of
from .errors import DelayqError
from .models import (
    Backoff, CancelMany, DeadLetterPage, Delivery, Message, NewMessage, PushTarget,
    QueueDeleted, QueueStats, RateLimit, Retention, Sent, SettleResult,
)


# The poll line of the worker task making a request, if any (see _pollcut.PollLine).
POLL_LINE: ContextVar[Optional[PollLine]] = ContextVar("delayq_poll_line", default=None)


class AsyncClient:
    """A delayq server's API, for asyncio. Arguments as :class:`delayq.Client`'s;
    ``http_client`` is an ``httpx.AsyncClient``, ``http_options`` the keyword arguments of
    the one it makes. Use ``async with`` or :meth:`aclose`."""

    def __init__(self, base_url: str = DEFAULT_URL, *, token: Optional[str] = None,
                 timeout: TimeoutArg = DEFAULT_TIMEOUT, retry: RetryPolicy = RetryPolicy(),
                 http_client: Optional[httpx.AsyncClient] = None,
                 http_options: Optional[Mapping[str, Any]] = None) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = default_headers(token)
        self._timeout = make_timeout(timeout)
        self._retry = retry
        self._owned = http_client is None
        self._http_options = http_options_of(http_options)
        self._http = http_client or httpx.AsyncClient(timeout=self._timeout,
                                                      **self._http_options)

    async def aclose(self) -> None:
        """Closes the connections (unless the httpx client was given)."""
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, exc_type: Optional[Type[BaseException]],
                        exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        await self.aclose()

    def _new_poll_http(self) -> Optional[httpx.AsyncClient]:
        """A pool of one connection for a worker's long polls, made as this client's own;
        None when this client was given its ``http_client``."""
        if not self._owned:
            return None
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        options = {**self._http_options, "limits": limits}
        return httpx.AsyncClient(timeout=self._timeout, **options)

    async def _call(self, op: Op[T]) -> T:
        """Runs ``op``, retrying as the policy allows; raises a :class:`DelayqError`."""
        line = POLL_LINE.get()
        http = line.http if line is not None and line.http is not None else self._http
        extensions = line.async_extensions if line is not None else None
        retries = 0
        while True:
            args = request_args(op, self._timeout)
            args["url"] = self.base_url + args["url"]
            sent = True
            try:
                response = await http.request(headers=self._headers, extensions=extensions,
                                              **args)
                return result_of(op, response)
            except httpx.RequestError as exc:
                error: DelayqError = transport_error(exc)
                sent = not never_sent(exc)
                cause: BaseException = exc
            except DelayqError as exc:
                error, cause = exc, exc
            wait = retry_delay(self._retry, op, error, retries, sent)
            if wait is None or (line is not None and line.cut_done):
                if error is cause:
                    raise error
                raise error from cause
            await asyncio.sleep(wait)
            retries += 1

    # Probes.

    async def health(self) -> bool:
        """True when the server process is up."""
        return await self._call(_ops.health())

    async def ready(self) -> bool:
        """True when the server's Redis answers (else :class:`UnavailableError`)."""
        return await self._call(_ops.ready())

    # Produce (role send).

    async def send(self, queue: str, payload: Any, *, delay: Optional[Duration] = None,
                   deliver_at: Optional[Time] = None, id: Optional[str] = None,
                   priority: Optional[int] = None, max_attempts: Optional[int] = None,
                   backoff: Optional[Backoff] = None, ttl: Optional[Duration] = None,
                   expires_at: Optional[Time] = None, group: Optional[str] = None,
                   on_duplicate: Optional[str] = None, max_wait: Optional[Duration] = None,
                   if_in_flight: Optional[str] = None, handler_timeout: Optional[Duration] = None,
                   replicas: Optional[int] = None, replicas_timeout: Optional[Duration] = None,
                   push_url: Optional[str] = None, push_headers: Optional[Mapping[str, str]] = None,
                   traceparent: Optional[str] = None) -> Sent:
        """Sends one message, due after ``delay`` or at ``deliver_at`` (else now). See
        :class:`NewMessage` for the options; with ``id`` the send is idempotent (a repeat is
        ``Sent.duplicate``) and retried after a 503."""
        message = NewMessage(
            payload, delay=delay, deliver_at=deliver_at, id=id, priority=priority,
            max_attempts=max_attempts, backoff=backoff, ttl=ttl, expires_at=expires_at,
            group=group, on_duplicate=on_duplicate, max_wait=max_wait,
            if_in_flight=if_in_flight, handler_timeout=handler_timeout, replicas=replicas,
            replicas_timeout=replicas_timeout, push_url=push_url, push_headers=push_headers,
            traceparent=traceparent)
        return await self._call(_produce.send(queue, message))

    async def send_batch(self, queue: str,
                         messages: Sequence[Union[NewMessage, Any]]) -> List[Sent]:
        """Sends several messages in one request, all or nothing (a plain value is a payload
        without options); a result each, in order."""
        return await self._call(_produce.send_batch(queue, messages))

    async def get(self, queue: str, id: str) -> Message:
        """A message by id (:class:`NotFoundError` if there is none)."""
        return await self._call(_produce.get(queue, id))

    async def cancel(self, queue: str, id: str) -> str:
        """Removes a delayed or ready message; answers the state it was in."""
        return await self._call(_produce.cancel(queue, id))

    async def cancel_many(self, queue: str, ids: Sequence[str]) -> CancelMany:
        """Cancels many messages by id in one request, each its own atomic cancel."""
        return await self._call(_produce.cancel_many(queue, ids))

    async def reschedule(self, queue: str, id: str, *, delay: Optional[Duration] = None,
                         deliver_at: Optional[Time] = None) -> int:
        """A new due time for a delayed or ready message; answers it (Unix ms)."""
        return await self._call(_produce.reschedule(queue, id, delay, deliver_at))

    # Consume (role consume).

    async def receive(self, queue: str, *, max: Optional[int] = None,
                      lease: Optional[Duration] = None,
                      wait: Optional[Duration] = None) -> List[Delivery]:
        """Claims up to ``max`` (default 1) due messages, each under ``lease`` (default
        30 s), waiting up to ``wait`` (default: answer at once) for one to come due."""
        return await self._call(_consume.receive(queue, max, lease, wait))

    async def ack_and_receive(self, queue: str, receipts: Sequence[str], *,
                              max: Optional[int] = None, lease: Optional[Duration] = None,
                              wait: Optional[Duration] = None
                              ) -> Tuple[List[SettleResult], List[Delivery]]:
        """Acks ``receipts`` of ``queue``, then receives as :meth:`receive` does, in one
        request (the acks never wait for its long poll): a result per receipt, and the
        deliveries."""
        return await self._call(_consume.ack_and_receive(queue, receipts, max, lease, wait))

    async def receive_many(self, *, queues: Optional[Sequence[str]] = None,
                           weights: Optional[Mapping[str, int]] = None, max: Optional[int] = None,
                           lease: Optional[Duration] = None,
                           wait: Optional[Duration] = None) -> List[Delivery]:
        """One receive over several queues: ``queues`` in strict order or ``weights``; each
        delivery names its ``queue``."""
        return await self._call(_consume.receive_many(queues, weights, max, lease, wait))

    async def ack(self, queue: str, receipt: str) -> None:
        """Done with a delivery. :class:`LeaseLostError` if its lease was lost."""
        await self._call(_consume.ack(queue, receipt))

    async def ack_many(self, queue: str, receipts: Sequence[str]) -> List[SettleResult]:
        """Acks several deliveries; a result each."""
        return await self._call(_consume.ack_many(queue, receipts))

    async def release(self, queue: str, receipt: str) -> None:
        """Hands a delivery back, ready at once, its attempt not counted."""
        await self._call(_consume.release(queue, receipt))

    async def release_many(self, queue: str, receipts: Sequence[str]) -> List[SettleResult]:
        """Releases several deliveries; a result each."""
        return await self._call(_consume.release_many(queue, receipts))

    async def extend(self, queue: str, receipt: str, *, lease: Optional[Duration] = None) -> int:
        """Renews a delivery's lease from now; answers the new deadline (Unix ms)."""
        return await self._call(_consume.extend(queue, receipt, lease))

    async def extend_many(self, queue: str, receipts: Sequence[str], *,
                          lease: Optional[Duration] = None) -> List[SettleResult]:
        """Renews several leases; a result each (``ok`` False: that lease was lost)."""
        return await self._call(_consume.extend_many(queue, receipts, lease))

    async def nack(self, queue: str, receipt: str, error: Optional[str] = None, *,
                   retry_after: Optional[Duration] = None, dead: bool = False,
                   payload: Any = UNSET, extra_attempts: Optional[int] = None) -> str:
        """A failed attempt: retried by backoff or after ``retry_after``, or a dead letter
        now with ``dead=True``. Answers ``retry``, ``dead``, ``expired`` or ``superseded``."""
        return await self._call(_consume.nack(queue, receipt, error, retry_after, dead, payload,
                                              extra_attempts))

    # Admin (role admin): queues, settings, dead letters, push targets.

    async def list_queues(self) -> List[QueueStats]:
        """Every queue with its counts."""
        return await self._call(_admin.list_queues())

    async def stats(self, queue: str) -> QueueStats:
        """One queue's counts and settings."""
        return await self._call(_admin.stats(queue))

    async def create_queue(self, queue: str, partitions: int) -> QueueStats:
        """Creates a queue spread over ``partitions`` (fixed for its life)."""
        return await self._call(_admin.create_queue(queue, partitions))

    async def configure(self, queue: str, *, idempotency_window: Duration = UNSET,
                        rate_limit: Optional[RateLimit] = UNSET,
                        default_ttl: Optional[Duration] = UNSET,
                        max_delay: Optional[Duration] = UNSET, on_expire: str = UNSET,
                        group_concurrency: Optional[int] = UNSET,
                        group_rate_limit: Optional[RateLimit] = UNSET,
                        events: EventsSetting = UNSET,
                        retain_completed: Optional[Retention] = UNSET) -> QueueStats:
        """Changes the settings given, all or none (``None`` lifts a limit or stops a
        recording; one left out stays); answers the stats. See ``_settings.configure``."""
        return await self._call(_settings.configure(
            queue, idempotency_window, rate_limit, default_ttl, max_delay, on_expire,
            group_concurrency, group_rate_limit, events, retain_completed))

    async def delete_queue(self, queue: str, *, force: bool = False) -> QueueDeleted:
        """Deletes the queue (with ``force``, the messages it holds too)."""
        return await self._call(_admin.delete_queue(queue, force))

    async def pause(self, queue: str) -> QueueStats:
        """Stops deliveries of the queue to every consumer; sends are still taken."""
        return await self._call(_admin.pause(queue))

    async def resume(self, queue: str) -> QueueStats:
        """Starts deliveries again."""
        return await self._call(_admin.resume(queue))

    async def dead_letters(self, queue: str, *, offset: int = 0,
                           limit: int = 100) -> DeadLetterPage:
        """A page of the queue's dead letters, oldest death first."""
        return await self._call(_admin.dead_letters(queue, offset, limit))

    async def requeue_dead(self, queue: str, id: str) -> int:
        """One dead letter back to ready, attempts reset."""
        return await self._call(_admin.requeue_dead(queue, id))

    async def requeue_all_dead(self, queue: str) -> int:
        """Every dead letter back to ready; answers how many."""
        return await self._call(_admin.requeue_all_dead(queue))

    async def purge_dead(self, queue: str, id: str) -> int:
        """Deletes one dead letter."""
        return await self._call(_admin.purge_dead(queue, id))

    async def purge_all_dead(self, queue: str) -> int:
        """Deletes every dead letter; answers how many."""
        return await self._call(_admin.purge_all_dead(queue))

    async def set_push_target(self, queue: str, url: str, *, method: Optional[str] = None,
                              headers: Optional[Mapping[str, str]] = None,
                              timeout: Optional[Duration] = None, concurrency: Optional[int] = None,
                              signing_keys: Optional[Sequence[str]] = None,
                              dead_statuses: Optional[Sequence[int]] = None,
                              failure_callback: Optional[str] = None,
                              follow_redirects: Optional[bool] = None,
                              rate_limit: Optional[RateLimit] = None,
                              allow_message_urls: Optional[Sequence[str]] = None) -> PushTarget:
        """Has the server push the queue's messages to ``url``, signed with the target's
        ``signing_keys`` (given, kept, or a new random one)."""
        return await self._call(_admin.set_push_target(
            queue, url, method, headers, timeout, concurrency, signing_keys, dead_statuses,
            failure_callback, follow_redirects, rate_limit, allow_message_urls))

    async def get_push_target(self, queue: str) -> PushTarget:
        """The queue's push target (:class:`NotFoundError` if none)."""
        return await self._call(_admin.get_push_target(queue))

    async def delete_push_target(self, queue: str) -> None:
        """Gives the queue back to pull consumers."""
        await self._call(_admin.delete_push_target(queue))

    # Schedules (role admin).

    async def put_schedule(self, queue: str, name: str, payload: Any, *, cron: Optional[str] = None,
                           time_zone: Optional[str] = None, every: Optional[Duration] = None,
                           missed: Optional[str] = None, jitter: Optional[Duration] = None,
                           overlap: Optional[str] = None, priority: Optional[int] = None,
                           max_attempts: Optional[int] = None, backoff: Optional[Backoff] = None,
                           handler_timeout: Optional[Duration] = None) -> Schedule:
        """Creates or replaces a recurring schedule: ``cron`` (in ``time_zone``) or
        ``every``; ``missed`` ``skip``/``once``/``all:N``; ``overlap`` ``allow``/``skip``."""
        return await self._call(_schedules.put_schedule(
            queue, name, payload, cron, time_zone, every, missed, jitter, overlap, priority,
            max_attempts, backoff, handler_timeout))

    async def get_schedule(self, queue: str, name: str) -> Schedule:
        """One schedule, with its next ticks (:class:`NotFoundError` if none)."""
        return await self._call(_schedules.get_schedule(queue, name))

    async def list_schedules(self, queue: str) -> List[Schedule]:
        """Every schedule of the queue."""
        return await self._call(_schedules.list_schedules(queue))

    async def delete_schedule(self, queue: str, name: str) -> bool:
        """Deletes a schedule (:class:`NotFoundError` if none)."""
        return await self._call(_schedules.delete_schedule(queue, name))

    async def pause_schedule(self, queue: str, name: str) -> Schedule:
        """No tick fires until resumed."""
        return await self._call(_schedules.pause_schedule(queue, name))

    async def resume_schedule(self, queue: str, name: str) -> Schedule:
        """Ticks fire again (its ``missed`` policy decides which skipped ones do now)."""
        return await self._call(_schedules.resume_schedule(queue, name))

    async def backfill_schedule(self, queue: str, name: str, *, from_: Time, to: Time) -> Backfill:
        """Sends each tick from ``from_`` to ``to`` that was never sent, due at once."""
        return await self._call(_schedules.backfill_schedule(queue, name, from_, to))

    # Groups (role admin).

    async def list_groups(self, queue: str, *, offset: int = 0, limit: int = 100) -> GroupPage:
        """A page of the queue's groups with messages, most messages first."""
        return await self._call(_groups.list_groups(queue, offset, limit))

    async def get_group(self, queue: str, group: str) -> Group:
        """One group: what it holds and its settings."""
        return await self._call(_groups.get_group(queue, group))

    async def configure_group(self, queue: str, group: str, *, concurrency: Optional[int] = UNSET,
                              weight: Optional[int] = UNSET,
                              rate_limit: Optional[RateLimit] = UNSET,
                              paused: bool = UNSET) -> Group:
        """Changes the group's own settings given (``None``: back to the queue's)."""
        return await self._call(_groups.configure_group(queue, group, concurrency, weight,
                                                        rate_limit, paused))

    async def pause_group(self, queue: str, group: str) -> Group:
        """The group's messages wait; the rest of the queue flows."""
        return await self._call(_groups.pause_group(queue, group))

    async def resume_group(self, queue: str, group: str) -> Group:
        """The group's messages are delivered again."""
        return await self._call(_groups.resume_group(queue, group))

    # Events (any role but monitor) and webhooks (role admin).

    async def events(self, queue: str, *, from_: str = "now", kinds: Optional[Sequence[str]] = None,
                     id: Optional[str] = None, limit: Optional[int] = None,
                     wait: Optional[Duration] = None) -> EventPage:
        """A page of the queue's events from ``from_`` (``"oldest"``, ``"now"`` or a
        cursor), waiting up to ``wait`` for a first one."""
        return await self._call(_events.events(queue, from_, kinds, id, limit, wait))

    async def follow_events(self, queue: str, *, from_: str = "now",
                            kinds: Optional[Sequence[str]] = None, id: Optional[str] = None,
                            limit: int = 100, wait: Duration = FOLLOW_WAIT) -> AsyncIterator[Event]:
        """The queue's events from ``from_`` on, as they happen: page after page, each a
        long poll of ``wait``, without end (break out of the loop). Keep the cursor of the
        last event handled to resume there; start from a page's ``cursor`` (read with
        ``from_="now"``) to be sure to miss nothing sent after it."""
        cursor = from_
        while True:
            page = await self.events(queue, from_=cursor, kinds=kinds, id=id, limit=limit,
                                     wait=wait)
            for event in page.events:
                yield event
            cursor = page.cursor

    async def set_webhooks(self, queue: str, webhooks: Sequence[Webhook], *,
                           signing_keys: Optional[Sequence[str]] = None) -> Webhooks:
        """Sets the queue's event webhooks in place of those it has."""
        return await self._call(_webhooks.set_webhooks(queue, webhooks, signing_keys))

    async def get_webhooks(self, queue: str) -> Webhooks:
        """The queue's webhooks and their signing keys."""
        return await self._call(_webhooks.get_webhooks(queue))

    async def delete_webhooks(self, queue: str) -> None:
        """Removes the queue's webhooks."""
        await self._call(_webhooks.delete_webhooks(queue))
