"""The asyncio worker: as :class:`delayq.Worker`, with tasks instead of threads. Being able to
cancel a task, it also cancels a handler whose lease was lost, or that ran past its
``handler_timeout`` (the worker's, or the one the message was sent with), and one still
running when a stop's grace period ends, after its delivery was released. Its long poll is a
task too: a stop cancels it (after letting it end on its own for a moment).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional, Set, Tuple

from ._durations import Duration
from ._pollcut import ANSWER_WAIT, PollLine
from ._sources import QueueSpec, by_queue, receipts_by_queue
from ._worker_options import EXTEND_CHUNK, GRACE, LEASE, POLL_SETTLE, POLL_WAIT, WorkerOptions
from .aio import POLL_LINE, AsyncClient
from .errors import DelayqError, LeaseLostError
from .handling import LEASE_MARGIN, CompletedHook, ErrorHook, FailedHook, Job, JobState, nack_args
from .handling import report_lost_acks, settle_hook
from .models import Delivery

__all__ = ["AsyncWorker", "AsyncHandler", "HandlerTimeout"]

log = logging.getLogger("delayq.worker")

AsyncHandler = Callable[[Delivery], Awaitable[Any]]


class HandlerTimeout(Exception):
    """A handler ran past its timeout (the attempt fails and is retried by backoff)."""


class AsyncWorker:
    """Runs the coroutine ``handler`` on the deliveries of ``queue`` (a name, names in strict
    order, or names and weights); settings and hooks as :class:`delayq.Worker`'s (a hook may
    also be a coroutine function), plus ``handler_timeout``. ``await run()`` works until
    ``await stop()`` (or SIGTERM/SIGINT with ``handle_signals``)."""

    def __init__(self, client: AsyncClient, queue: QueueSpec, handler: AsyncHandler, *,
                 concurrency: int = 1, lease: Duration = LEASE,
                 poll_wait: Duration = POLL_WAIT, grace: Duration = GRACE,
                 extend_every: Optional[Duration] = None,
                 retry_after: Optional[Duration] = None,
                 handler_timeout: Optional[Duration] = None, log_failures: bool = True,
                 on_failed: Optional[FailedHook] = None,
                 on_completed: Optional[CompletedHook] = None,
                 on_error: Optional[ErrorHook] = None) -> None:
        self.options = WorkerOptions.of(
            queue, concurrency=concurrency, lease=lease, poll_wait=poll_wait, grace=grace,
            extend_every=extend_every, retry_after=retry_after,
            handler_timeout=handler_timeout, log_failures=log_failures, on_failed=on_failed,
            on_completed=on_completed, on_error=on_error)
        self.client = client
        self.handler = handler
        self.queues = self.options.source.queues
        self._hooks = self.options.hooks
        self._jobs: Dict[str, Job] = {}
        # Receipts of handlers that succeeded while the poller waited for their slot: its
        # next receive acks them (one request for both; one queue only).
        self._carried: List[str] = []
        self._tasks: Dict[str, "asyncio.Task[None]"] = {}
        self._poll_task: Optional["asyncio.Task[List[Delivery]]"] = None
        self._line: Optional[PollLine] = None
        self._closed = False
        self._stop_asked = False
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stopping: Optional[asyncio.Event] = None
        self._changed: Optional[asyncio.Event] = None
        self._finished: Optional[asyncio.Event] = None

    # Starting and stopping.

    async def run(self, *, handle_signals: bool = False) -> None:
        """Works until stopped, then lets running handlers finish within ``grace``,
        releases what is unfinished and returns."""
        if self._loop is not None:
            raise RuntimeError("a worker runs once")
        loop = self._loop = asyncio.get_running_loop()
        self._line = PollLine(self.client._new_poll_http())
        self._stopping, self._changed, self._finished = (asyncio.Event(), asyncio.Event(),
                                                         asyncio.Event())
        if self._stop_asked:
            self._stopping.set()
        signals = [signal.SIGTERM, signal.SIGINT] if handle_signals else []
        for signum in signals:
            loop.add_signal_handler(signum, self.request_stop)
        extender = asyncio.create_task(self._extend_loop())
        poller = asyncio.create_task(self._poll_loop())
        stop_wait = asyncio.create_task(self._stopping.wait())
        try:
            await asyncio.wait({poller, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            self._stopping.set()
            stop_wait.cancel()
            await self._cut_poll()
            await self._shutdown(poller, extender)
            await self._line.aclose()
            for signum in signals:
                loop.remove_signal_handler(signum)
            self._finished.set()

    def request_stop(self) -> None:
        """Asks the worker to stop, without waiting; safe from any thread."""
        self._stop_asked = True
        if self._loop is not None and self._stopping is not None:
            self._loop.call_soon_threadsafe(self._stopping.set)

    async def stop(self) -> None:
        """Stops the worker and waits until it has stopped (see :meth:`run`)."""
        self.request_stop()
        if self._finished is not None:
            await self._finished.wait()

    @property
    def stopped(self) -> bool:
        """True once the worker has stopped."""
        return self._finished is not None and self._finished.is_set()

    async def _wait_change(self, timeout: float) -> None:
        """Until a job ends or ``timeout`` passes."""
        assert self._changed is not None
        self._changed.clear()
        try:
            await asyncio.wait_for(self._changed.wait(), timeout)
        except asyncio.TimeoutError:
            pass

    async def _cut_poll(self) -> None:
        """Lets a long poll under way end on its own for a moment, and an answer that has
        begun to arrive be read; then cancels it."""
        task = self._poll_task
        if task is None or task.done():
            return
        await asyncio.wait({task}, timeout=POLL_SETTLE)
        give_up = time.monotonic() + ANSWER_WAIT
        while (not task.done() and self._line is not None and self._line.answering()
               and time.monotonic() < give_up):
            await asyncio.wait({task}, timeout=0.02)
        if not task.done():
            task.cancel()

    async def _shutdown(self, poller: "asyncio.Task[None]",
                        extender: "asyncio.Task[None]") -> None:
        deadline = time.monotonic() + self.options.grace_s
        while self._jobs and time.monotonic() < deadline:
            await self._wait_change(deadline - time.monotonic())
        self._closed = True
        unfinished = [j for j in self._jobs.values() if j.decide(JobState.RELEASED)]
        await self._release([j.delivery for j in unfinished])
        tasks = [self._tasks[j.delivery.receipt] for j in unfinished
                 if j.delivery.receipt in self._tasks]
        for task in tasks:
            task.cancel()
        extender.cancel()
        # A handler that ignores cancellation is left behind rather than awaited forever.
        await asyncio.wait([extender, *tasks], timeout=5.0)
        done, _ = await asyncio.wait([poller], timeout=self.options.poll_wait_s + 15.0)
        if not done:
            poller.cancel()

    async def _release(self, deliveries: List[Delivery]) -> None:
        for queue, receipts in receipts_by_queue(deliveries).items():
            try:
                await self.client.release_many(queue, receipts)
                log.info("released %d unfinished deliveries of %s", len(receipts), queue)
            except DelayqError as exc:
                log.warning("could not release %d deliveries of %s (they return after "
                            "their leases): %s", len(receipts), queue, exc)
                await settle_hook("on_error", self._hooks.error(exc))

    # The loops.

    async def _poll_loop(self) -> None:
        assert self._stopping is not None
        failures = 0
        while not self._stopping.is_set():
            while len(self._jobs) >= self.options.concurrency and not self._stopping.is_set():
                await self._wait_change(0.2)
            if self._stopping.is_set():
                break
            acks, self._carried = self._carried, []
            claimed_at = time.monotonic()
            free = self.options.concurrency - len(self._jobs)
            task = self._poll_task = asyncio.create_task(self._receive(free, acks))
            try:
                await asyncio.wait({task})
            finally:
                self._poll_task = None
                if not task.done():  # this loop itself was cancelled
                    task.cancel()
            error = None if task.cancelled() else task.exception()
            if task.cancelled() or error is not None:
                # Whether its acks were made is unknown: sent again, on their own.
                await self._ack_on_their_own(acks)
                if self._stopping.is_set():
                    break  # cut by the stop
                assert error is not None
                failures += 1
                log.warning("receive from %s failed: %s", self.options.source.name, error)
                await settle_hook("on_error", self._hooks.error(error))
                await self._pause(min(5.0, 0.1 * 2 ** failures))
                continue
            failures = 0
            await self._accept(task.result(), claimed_at)
        acks, self._carried = self._carried, []
        await self._ack_on_their_own(acks)

    async def _pause(self, seconds: float) -> None:
        """Waits ``seconds``, or less if the worker is stopped meanwhile."""
        assert self._stopping is not None
        try:
            await asyncio.wait_for(self._stopping.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _receive(self, free: int, acks: List[str]) -> List[Delivery]:
        # This runs as the poll task: its requests go over the worker's own line.
        POLL_LINE.set(self._line)
        o = self.options
        single = o.source.single
        if single is None:
            return await self.client.receive_many(
                queues=o.source.strict, weights=o.source.weights, max=free, lease=o.lease,
                wait=o.poll_wait)
        if acks:
            acked, deliveries = await self.client.ack_and_receive(
                single, acks, max=free, lease=o.lease, wait=o.poll_wait)
            report_lost_acks(acked)
            return deliveries
        return await self.client.receive(single, max=free, lease=o.lease, wait=o.poll_wait)

    async def _ack_on_their_own(self, receipts: List[str]) -> None:
        single = self.options.source.single
        if not receipts or single is None:
            return
        try:
            # One acked already (by a request whose answer was lost) answers ok False.
            await self.client.ack_many(single, receipts)
        except DelayqError as exc:
            log.error("acking %d deliveries failed (they return after their leases): %s",
                      len(receipts), exc)
            await settle_hook("on_error", self._hooks.error(exc))

    async def _accept(self, deliveries: List[Delivery], claimed_at: float) -> None:
        assert self._stopping is not None
        margin = self.options.lease_s * LEASE_MARGIN
        if deliveries and time.monotonic() - claimed_at >= self.options.lease_s - margin:
            # The claim happened somewhere in a poll about as long as a lease: its lease may
            # have ended, or be within its margin. Renewed before starting.
            claimed_at, deliveries = await self._renew(deliveries)
        late: List[Delivery] = []
        for delivery in deliveries:
            if self._stopping.is_set() or self._closed:
                late.append(delivery)
                continue
            job = Job(delivery, self.options.lease_s, claimed_at)
            if job.lease_passed():
                log.warning("skipping %s: its lease passed before it started", delivery.id)
                continue
            self._jobs[delivery.receipt] = job
            self._tasks[delivery.receipt] = asyncio.create_task(self._run_job(job))
            self._watch_lease(job)
        await self._release(late)

    async def _renew(self, deliveries: List[Delivery]) -> Tuple[float, List[Delivery]]:
        """Extends the leases of deliveries not started yet: answers when the extends were
        sent and the deliveries still leased (the others are the server's again)."""
        sent_at = time.monotonic()
        ok: Set[str] = set()
        for queue, receipts in receipts_by_queue(deliveries).items():
            try:
                results = await self.client.extend_many(queue, receipts, lease=self.options.lease)
            except DelayqError as exc:
                log.warning("renewing %d late deliveries failed: %s", len(receipts), exc)
                continue
            ok |= {r.receipt for r in results if r.ok}
        return sent_at, [d for d in deliveries if d.receipt in ok]

    def _watch_lease(self, job: Job) -> None:
        """(Re)arms the timer that gives ``job`` up once only the margin of its lease is left."""
        if job.lease_timer is not None:
            job.lease_timer.cancel()
        left = job.lease_ends - self.options.lease_s * LEASE_MARGIN - time.monotonic()
        job.lease_timer = asyncio.get_running_loop().call_later(
            max(0.0, left), self._lose, job, "could not be renewed in time")

    async def _extend_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.extend_every_s)
            running = [j for j in self._jobs.values() if j.running]
            for queue, jobs in by_queue(running).items():
                for start in range(0, len(jobs), EXTEND_CHUNK):
                    await self._extend(queue, jobs[start:start + EXTEND_CHUNK])

    async def _extend(self, queue: str, jobs: List[Job]) -> None:
        sent_at = time.monotonic()
        try:
            results = await self.client.extend_many(
                queue, [j.delivery.receipt for j in jobs], lease=self.options.lease)
        except DelayqError as exc:
            # Each job's lease timer gives it up if no later extend gets through in time.
            log.warning("extending %d leases failed: %s", len(jobs), exc)
            await settle_hook("on_error", self._hooks.error(exc))
            return
        ok = {r.receipt for r in results if r.ok}
        for job in jobs:
            if job.delivery.receipt in ok:
                job.lease_ends = sent_at + self.options.lease_s
                if job.running:
                    self._watch_lease(job)
            else:
                self._lose(job, "was lost")

    def _lose(self, job: Job, how: str) -> None:
        """The lease is gone: the message may be someone else's; stop its handler."""
        if job.decide(JobState.LOST):
            log.warning("lease of %s %s; cancelling its handler", job.delivery.id, how)
            task = self._tasks.get(job.delivery.receipt)
            if task is not None:
                task.cancel()

    # One delivery.

    def _timeout_for(self, delivery: Delivery) -> Optional[float]:
        if delivery.handler_timeout_ms is not None:
            return delivery.handler_timeout_ms / 1000.0
        return self.options.handler_timeout_s

    async def _run_job(self, job: Job) -> None:
        timeout = self._timeout_for(job.delivery)
        started = time.monotonic()
        failure: Optional[BaseException] = None
        result: Any = None
        try:
            try:
                if timeout is None:
                    result = await self.handler(job.delivery)
                else:
                    result = await asyncio.wait_for(self.handler(job.delivery), timeout)
            except asyncio.TimeoutError as exc:
                timed_out = timeout is not None and time.monotonic() - started >= timeout
                failure = HandlerTimeout(f"handler timed out after {timeout}s") if timed_out \
                    else exc
            except Exception as exc:  # noqa: BLE001 - any failure of the handler is a nack
                failure = exc
            if failure is not None:
                self._hooks.log_failure(job.delivery, failure)
                await self._settle(job, failure)
                await settle_hook("on_failed", self._hooks.failed(job.delivery, failure))
            else:
                await self._settle(job, None)
                await settle_hook("on_completed", self._hooks.completed(job.delivery, result))
        finally:
            if job.lease_timer is not None:
                job.lease_timer.cancel()
            self._jobs.pop(job.delivery.receipt, None)
            self._tasks.pop(job.delivery.receipt, None)
            if self._changed is not None:
                self._changed.set()

    async def _settle(self, job: Job, exc: Optional[BaseException]) -> None:
        d = job.delivery
        if not job.decide(JobState.FINISHED):
            log.info("%s: handler ended after its delivery was %s; result dropped",
                     d.id, job.state.value)
            return
        # The poller waits for this job's slot: the receive it makes as this job ends acks it.
        running = self._stopping is not None and not self._stopping.is_set()
        if (exc is None and self.options.source.single is not None
                and len(self._jobs) >= self.options.concurrency and running):
            self._carried.append(d.receipt)
            return
        try:
            if exc is None:
                await self.client.ack(d.queue, d.receipt)
            else:
                args = nack_args(exc, self.options.retry_after)
                await self.client.nack(d.queue, d.receipt, args.error,
                                       retry_after=args.retry_after, dead=args.dead)
        except LeaseLostError:
            log.warning("%s: lease lost before it could be settled", d.id)
        except DelayqError as exc2:
            log.error("%s: settling failed (it returns after its lease): %s", d.id, exc2)
            await settle_hook("on_error", self._hooks.error(exc2))
