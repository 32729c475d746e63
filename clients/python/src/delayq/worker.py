"""The thread-based worker: long-polls a queue, runs a handler on up to ``concurrency``
deliveries at once in a thread pool, keeps their leases extended while they run, acks or
nacks each by how its handler ended, and stops gracefully.

Threads: ``run()``'s own waits for the stop; a poller receives (asking only for as many
messages as there are free slots, so nothing waits unstarted under a lease); an extender
renews every running delivery's lease in one call each ``extend_every`` seconds. A handler
whose lease is lost cannot be interrupted (a thread cannot be), but its result is dropped:
the message is someone else's by then.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Union

from ._convert import Duration
from .client import Client
from .errors import DelayqError, LeaseLostError
from .handling import Job, JobState, nack_args, report_lost_acks
from .models import Delivery

__all__ = ["Worker", "Handler"]

log = logging.getLogger("delayq.worker")

Handler = Callable[[Delivery], Any]
Seconds = Union[float, int, timedelta]

# Most receipts in one extend call (the server's default batch limit is 1000).
EXTEND_CHUNK = 500


def seconds(value: Seconds) -> float:
    """Seconds of a worker setting."""
    return value.total_seconds() if isinstance(value, timedelta) else float(value)


class Worker:
    """Runs ``handler`` on the deliveries of ``queue``.

    ``lease``: each delivery's lease, renewed every ``extend_every`` (default a third of it)
    while its handler runs. ``poll_wait``: how long one receive waits for a message (a stop
    waits for the receive under way). ``grace``: how long a stop lets running handlers
    finish before it releases their deliveries. ``retry_after``: when a handler raises a
    plain exception, retry after this instead of by the message's backoff.
    """

    def __init__(self, client: Client, queue: str, handler: Handler, *, concurrency: int = 1,
                 lease: Seconds = 30.0, poll_wait: Seconds = 5.0, grace: Seconds = 30.0,
                 extend_every: Optional[Seconds] = None,
                 retry_after: Optional[Duration] = None) -> None:
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
        self._cond = threading.Condition()
        self._jobs: Dict[str, Job] = {}
        # Receipts of handlers that succeeded while the poller waited for their slot: its
        # next receive acks them (one request for both).
        self._carried: List[str] = []
        self._closed = False
        self._stopping = threading.Event()
        self._extender_stop = threading.Event()
        self._finished = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._ran = False

    # Starting and stopping.

    def run(self, *, handle_signals: bool = False) -> None:
        """Works until :meth:`stop` (or, with ``handle_signals``, SIGTERM or SIGINT; only
        from the main thread), then stops gracefully and returns."""
        if self._ran:
            raise RuntimeError("a worker runs once")
        self._ran = True
        restore = self._install_signals() if handle_signals else {}
        pool = ThreadPoolExecutor(self.concurrency, thread_name_prefix=f"delayq-{self.queue}")
        poller = threading.Thread(target=self._poll_loop, args=(pool,), daemon=True,
                                  name=f"delayq-poll-{self.queue}")
        extender = threading.Thread(target=self._extend_loop, daemon=True,
                                    name=f"delayq-extend-{self.queue}")
        poller.start()
        extender.start()
        try:
            # A timed wait, so that signal handlers run promptly in the main thread.
            while not self._stopping.wait(0.2):
                if not poller.is_alive():
                    break
        finally:
            self._stopping.set()
            self._shutdown(pool, poller, extender)
            for signum, previous in restore.items():
                signal.signal(signum, previous)
            self._finished.set()

    def start(self) -> "Worker":
        """Runs the worker in a background thread; :meth:`stop` ends it."""
        self._thread = threading.Thread(target=self.run, name=f"delayq-worker-{self.queue}")
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Asks the worker to stop, without waiting (safe from a signal handler)."""
        self._stopping.set()

    def stop(self, wait: bool = True, timeout: Optional[float] = None) -> bool:
        """Stops the worker: no new deliveries; running handlers get ``grace`` seconds, then
        their deliveries are released for other consumers. With ``wait``, returns once the
        worker has stopped (True) or ``timeout`` passed (False)."""
        self.request_stop()
        if not wait or not self._ran:
            return self._finished.is_set()
        return self._finished.wait(timeout)

    @property
    def stopped(self) -> bool:
        """True once the worker has stopped."""
        return self._finished.is_set()

    def _install_signals(self) -> Dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError("handle_signals needs the main thread")
        previous: Dict[int, Any] = {}
        for signum in (signal.SIGTERM, signal.SIGINT):
            previous[signum] = signal.signal(signum, lambda *_: self.request_stop())
        return previous

    def _shutdown(self, pool: ThreadPoolExecutor, poller: threading.Thread,
                  extender: threading.Thread) -> None:
        deadline = time.monotonic() + self.grace
        with self._cond:
            while self._jobs and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))
            # From here on the poller releases whatever it receives.
            self._closed = True
            unfinished = [j for j in self._jobs.values() if j.decide(JobState.RELEASED)]
        self._release([j.delivery.receipt for j in unfinished])
        self._extender_stop.set()
        extender.join()
        poller.join(self.poll_wait + 15.0)
        # Handlers still running (released) end on their own; their results are dropped.
        pool.shutdown(wait=False)

    def _release(self, receipts: List[str]) -> None:
        if not receipts:
            return
        try:
            self.client.release_many(self.queue, receipts)
            log.info("released %d unfinished deliveries of %s", len(receipts), self.queue)
        except DelayqError as exc:
            log.warning("could not release %d deliveries (they return after their leases):"
                        " %s", len(receipts), exc)

    # The three loops.

    def _poll_loop(self, pool: ThreadPoolExecutor) -> None:
        failures = 0
        while not self._stopping.is_set():
            with self._cond:
                while len(self._jobs) >= self.concurrency and not self._stopping.is_set():
                    self._cond.wait(0.2)
                free = self.concurrency - len(self._jobs)
                acks, self._carried = self._carried, []
            if self._stopping.is_set():
                self._ack_on_their_own(acks)
                break
            claimed_at = time.monotonic()
            try:
                if acks:
                    acked, deliveries = self.client.ack_and_receive(
                        self.queue, acks, max=free, lease=self.lease, wait=self.poll_wait)
                    report_lost_acks(acked)
                else:
                    deliveries = self.client.receive(self.queue, max=free, lease=self.lease,
                                                     wait=self.poll_wait)
                failures = 0
            except Exception as exc:  # noqa: BLE001 - a worker outlives a bad answer
                failures += 1
                log.warning("receive from %s failed: %s", self.queue, exc)
                # Whether its acks were made is unknown: sent again, on their own.
                self._ack_on_their_own(acks)
                self._stopping.wait(min(5.0, 0.1 * 2 ** failures))
                continue
            self._accept(deliveries, claimed_at, pool)
        with self._cond:
            acks, self._carried = self._carried, []
        self._ack_on_their_own(acks)

    def _ack_on_their_own(self, receipts: List[str]) -> None:
        if not receipts:
            return
        try:
            # One acked already (by a request whose answer was lost) answers ok False.
            self.client.ack_many(self.queue, receipts)
        except DelayqError as exc:
            log.error("acking %d deliveries failed (they return after their leases): %s",
                      len(receipts), exc)

    def _accept(self, deliveries: List[Delivery], claimed_at: float,
                pool: ThreadPoolExecutor) -> None:
        late: List[str] = []
        with self._cond:
            for delivery in deliveries:
                if self._stopping.is_set() or self._closed:
                    late.append(delivery.receipt)
                    continue
                job = Job(delivery, self.lease, claimed_at)
                if job.lease_passed():
                    # Its answer came after its lease: it may be someone else's already.
                    log.warning("skipping %s: its lease passed before it started", delivery.id)
                    continue
                self._jobs[delivery.receipt] = job
                pool.submit(self._run_job, job)
        self._release(late)

    def _extend_loop(self) -> None:
        while not self._extender_stop.wait(self.extend_every):
            with self._cond:
                running = [j for j in self._jobs.values() if j.running]
            for start in range(0, len(running), EXTEND_CHUNK):
                self._extend(running[start:start + EXTEND_CHUNK])

    def _extend(self, jobs: List[Job]) -> None:
        sent_at = time.monotonic()
        try:
            results = self.client.extend_many(self.queue, [j.delivery.receipt for j in jobs],
                                              lease=self.lease)
        except DelayqError as exc:
            log.warning("extending %d leases failed: %s", len(jobs), exc)
            for job in jobs:
                if job.lease_passed() and job.decide(JobState.LOST):
                    log.warning("lease of %s passed unrenewed", job.delivery.id)
            return
        ok = {r.receipt for r in results if r.ok}
        for job in jobs:
            if job.delivery.receipt in ok:
                job.lease_ends = sent_at + self.lease
            elif job.decide(JobState.LOST):
                log.warning("lease of %s was lost; its handler's result will be dropped",
                            job.delivery.id)

    # One delivery.

    def _run_job(self, job: Job) -> None:
        try:
            try:
                self.handler(job.delivery)
            except Exception as exc:  # noqa: BLE001 - any failure of the handler is a nack
                self._settle(job, exc)
            else:
                self._settle(job, None)
        finally:
            with self._cond:
                self._jobs.pop(job.delivery.receipt, None)
                self._cond.notify_all()

    def _settle(self, job: Job, exc: Optional[BaseException]) -> None:
        d = job.delivery
        if not job.decide(JobState.FINISHED):
            log.info("%s: handler ended after its delivery was %s; result dropped",
                     d.id, job.state.value)
            return
        if exc is None:
            with self._cond:
                # The poller waits for this job's slot: the receive it makes as this job
                # ends acks it.
                if len(self._jobs) >= self.concurrency and not self._stopping.is_set():
                    self._carried.append(d.receipt)
                    return
        try:
            if exc is None:
                self.client.ack(d.queue, d.receipt)
            else:
                args = nack_args(exc, self.retry_after)
                self.client.nack(d.queue, d.receipt, args.error, retry_after=args.retry_after,
                                 dead=args.dead)
        except LeaseLostError:
            log.warning("%s: lease lost before it could be settled", d.id)
        except DelayqError as exc2:
            log.error("%s: settling failed (it returns after its lease): %s", d.id, exc2)
