"""The asyncio worker: as :class:`delayq.Worker`, with tasks instead of threads. Being able to
cancel a task, it also cancels a handler whose lease was lost, or that ran past its
``handler_timeout`` (the worker's, or the one the message was sent with), and one still
running when a stop's grace period ends, after its delivery was released.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from typing import Any, Awaitable, Callable, Dict, List, Optional

from ._convert import Duration
from .aio import AsyncClient
from .errors import DelayqError, LeaseLostError
from .handling import Job, JobState, nack_args, report_lost_acks
from .models import Delivery
from .worker import EXTEND_CHUNK, Seconds, seconds

__all__ = ["AsyncWorker", "AsyncHandler"]

log = logging.getLogger("delayq.worker")

AsyncHandler = Callable[[Delivery], Awaitable[Any]]


class HandlerTimeout(Exception):
    """A handler ran past its timeout (the attempt fails and is retried by backoff)."""


class AsyncWorker:
    """Runs the coroutine ``handler`` on the deliveries of ``queue``; settings as
    :class:`delayq.Worker`'s, plus ``handler_timeout``. ``await run()`` works until
    ``await stop()`` (or SIGTERM/SIGINT with ``handle_signals``)."""

    def __init__(self, client: AsyncClient, queue: str, handler: AsyncHandler, *,
                 concurrency: int = 1, lease: Seconds = 30.0, poll_wait: Seconds = 5.0,
                 grace: Seconds = 30.0, extend_every: Optional[Seconds] = None,
                 retry_after: Optional[Duration] = None,
                 handler_timeout: Optional[Seconds] = None) -> None:
        if concurrency < 1:
            raise ValueError("concurrency is at least 1")
        self.client = client
        self.queue = queue
        self.handler = handler
        self.concurrency = concurrency
        self.lease = seconds(lease)
        self.poll_wait = seconds(poll_wait)
        self.grace = seconds(grace)
        self.extend_every = seconds(extend_every) if extend_every else max(self.lease / 3, 0.05)
        self.retry_after = retry_after
        self.handler_timeout = seconds(handler_timeout) if handler_timeout else None
        self._jobs: Dict[str, Job] = {}
        # Receipts of handlers that succeeded while the poller waited for their slot: its
        # next receive acks them (one request for both).
        self._carried: List[str] = []
        self._tasks: Dict[str, "asyncio.Task[None]"] = {}
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
            await self._shutdown(poller, extender)
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

    async def _shutdown(self, poller: "asyncio.Task[None]",
                        extender: "asyncio.Task[None]") -> None:
        deadline = time.monotonic() + self.grace
        while self._jobs and time.monotonic() < deadline:
            await self._wait_change(deadline - time.monotonic())
        self._closed = True
        unfinished = [j for j in self._jobs.values() if j.decide(JobState.RELEASED)]
        await self._release([j.delivery.receipt for j in unfinished])
        tasks = [self._tasks[j.delivery.receipt] for j in unfinished
                 if j.delivery.receipt in self._tasks]
        for task in tasks:
            task.cancel()
        extender.cancel()
        # A handler that ignores cancellation is left behind rather than awaited forever.
        await asyncio.wait([extender, *tasks], timeout=5.0)
        done, _ = await asyncio.wait([poller], timeout=self.poll_wait + 15.0)
        if not done:
            poller.cancel()

    async def _release(self, receipts: List[str]) -> None:
        if not receipts:
            return
        try:
            await self.client.release_many(self.queue, receipts)
            log.info("released %d unfinished deliveries of %s", len(receipts), self.queue)
        except DelayqError as exc:
            log.warning("could not release %d deliveries (they return after their leases):"
                        " %s", len(receipts), exc)

    # The loops.

    async def _poll_loop(self) -> None:
        assert self._stopping is not None
        failures = 0
        while not self._stopping.is_set():
            while len(self._jobs) >= self.concurrency and not self._stopping.is_set():
                await self._wait_change(0.2)
            acks, self._carried = self._carried, []
            if self._stopping.is_set():
                await self._ack_on_their_own(acks)
                break
            claimed_at = time.monotonic()
            free = self.concurrency - len(self._jobs)
            try:
                if acks:
                    acked, deliveries = await self.client.ack_and_receive(
                        self.queue, acks, max=free, lease=self.lease, wait=self.poll_wait)
                    report_lost_acks(acked)
                else:
                    deliveries = await self.client.receive(
                        self.queue, max=free, lease=self.lease, wait=self.poll_wait)
                failures = 0
            except Exception as exc:  # noqa: BLE001 - a worker outlives a bad answer
                failures += 1
                log.warning("receive from %s failed: %s", self.queue, exc)
                # Whether its acks were made is unknown: sent again, on their own.
                await self._ack_on_their_own(acks)
                await asyncio.sleep(min(5.0, 0.1 * 2 ** failures))
                continue
            await self._accept(deliveries, claimed_at)
        acks, self._carried = self._carried, []
        await self._ack_on_their_own(acks)

    async def _ack_on_their_own(self, receipts: List[str]) -> None:
        if not receipts:
            return
        try:
            # One acked already (by a request whose answer was lost) answers ok False.
            await self.client.ack_many(self.queue, receipts)
        except DelayqError as exc:
            log.error("acking %d deliveries failed (they return after their leases): %s",
                      len(receipts), exc)

    async def _accept(self, deliveries: List[Delivery], claimed_at: float) -> None:
        assert self._stopping is not None
        late: List[str] = []
        for delivery in deliveries:
            if self._stopping.is_set() or self._closed:
                late.append(delivery.receipt)
                continue
            job = Job(delivery, self.lease, claimed_at)
            if job.lease_passed():
                log.warning("skipping %s: its lease passed before it started", delivery.id)
                continue
            self._jobs[delivery.receipt] = job
            self._tasks[delivery.receipt] = asyncio.create_task(self._run_job(job))
        await self._release(late)

    async def _extend_loop(self) -> None:
        while True:
            await asyncio.sleep(self.extend_every)
            running = [j for j in self._jobs.values() if j.running]
            for start in range(0, len(running), EXTEND_CHUNK):
                await self._extend(running[start:start + EXTEND_CHUNK])

    async def _extend(self, jobs: List[Job]) -> None:
        sent_at = time.monotonic()
        try:
            results = await self.client.extend_many(
                self.queue, [j.delivery.receipt for j in jobs], lease=self.lease)
        except DelayqError as exc:
            log.warning("extending %d leases failed: %s", len(jobs), exc)
            for job in jobs:
                if job.lease_passed():
                    self._lose(job, "passed unrenewed")
            return
        ok = {r.receipt for r in results if r.ok}
        for job in jobs:
            if job.delivery.receipt in ok:
                job.lease_ends = sent_at + self.lease
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
        return self.handler_timeout

    async def _run_job(self, job: Job) -> None:
        timeout = self._timeout_for(job.delivery)
        started = time.monotonic()
        try:
            try:
                if timeout is None:
                    await self.handler(job.delivery)
                else:
                    await asyncio.wait_for(self.handler(job.delivery), timeout)
            except asyncio.TimeoutError as exc:
                timed_out = timeout is not None and time.monotonic() - started >= timeout
                failure = HandlerTimeout(f"handler timed out after {timeout}s") if timed_out \
                    else exc
                await self._settle(job, failure)
            except Exception as exc:  # noqa: BLE001 - any failure of the handler is a nack
                await self._settle(job, exc)
            else:
                await self._settle(job, None)
        finally:
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
        if exc is None and len(self._jobs) >= self.concurrency and running:
            self._carried.append(d.receipt)
            return
        try:
            if exc is None:
                await self.client.ack(d.queue, d.receipt)
            else:
                args = nack_args(exc, self.retry_after)
                await self.client.nack(d.queue, d.receipt, args.error,
                                       retry_after=args.retry_after, dead=args.dead)
        except LeaseLostError:
            log.warning("%s: lease lost before it could be settled", d.id)
        except DelayqError as exc2:
            log.error("%s: settling failed (it returns after its lease): %s", d.id, exc2)
