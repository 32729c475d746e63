"""The thread-based worker: long-polls one queue or several, runs a handler on up to
``concurrency`` deliveries at once in a thread pool, keeps their leases extended while they
run, acks or nacks each by how its handler ended (logging a failure with its stack, and
calling the outcome hooks), and stops promptly and gracefully.

Threads: ``run()``'s own waits for the stop; a poller receives (asking only for as many
messages as there are free slots, so nothing waits unstarted under a lease); an extender
renews every running delivery's lease in one call per queue each ``extend_every``. A handler
whose lease is lost cannot be interrupted (a thread cannot be), but its result is dropped:
the message is someone else's by then.

A stop takes no more messages and cuts the long poll under way (see :mod:`delayq._pollcut`),
lets running handlers finish within ``grace`` and settles them, and releases whatever is
left, so that it is ready for another consumer at once.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, List, Optional

from ._durations import Duration, duration_seconds
from ._pollcut import ANSWER_WAIT, PollLine
from ._sources import QueueSpec, by_queue, receipts_by_queue
from ._worker_options import EXTEND_CHUNK, GRACE, LEASE, POLL_SETTLE, POLL_WAIT, WorkerOptions
from .client import Client
from .errors import DelayqError, LeaseLostError
from .handling import CompletedHook, ErrorHook, FailedHook, Job, JobState, nack_args
from .handling import report_lost_acks
from .models import Delivery

__all__ = ["Worker", "Handler"]

log = logging.getLogger("delayq.worker")

Handler = Callable[[Delivery], Any]


class Worker:
    """Runs ``handler`` on the deliveries of ``queue``: a queue's name, names in strict
    order (``["critical", "default"]``), or names and weights (``{"a": 6, "b": 1}``).

    ``lease``: each delivery's lease, renewed every ``extend_every`` (default a third of it)
    while its handler runs. ``poll_wait``: how long one receive waits for a message.
    ``grace``: how long a stop lets running handlers finish before it releases their
    deliveries. ``retry_after``: when a handler raises a plain exception, retry after this
    instead of by the message's backoff. All durations: a timedelta or text (``"30s"``).
    ``log_failures``: log each handler failure with its stack on ``delayq.worker``.
    ``on_failed(delivery, exc)``, ``on_completed(delivery, result)``, ``on_error(exc)``:
    hooks (see :class:`delayq.handling.Hooks`).
    """

    def __init__(self, client: Client, queue: QueueSpec, handler: Handler, *,
                 concurrency: int = 1, lease: Duration = LEASE,
                 poll_wait: Duration = POLL_WAIT, grace: Duration = GRACE,
                 extend_every: Optional[Duration] = None,
                 retry_after: Optional[Duration] = None, log_failures: bool = True,
                 on_failed: Optional[FailedHook] = None,
                 on_completed: Optional[CompletedHook] = None,
                 on_error: Optional[ErrorHook] = None) -> None:
        self.options = WorkerOptions.of(
            queue, concurrency=concurrency, lease=lease, poll_wait=poll_wait, grace=grace,
            extend_every=extend_every, retry_after=retry_after, log_failures=log_failures,
            on_failed=on_failed, on_completed=on_completed, on_error=on_error)
        self.client = client
        self.handler = handler
        self.queues = self.options.source.queues
        self._hooks = self.options.hooks
        self._cond = threading.Condition()
        self._jobs: Dict[str, Job] = {}
        # Receipts of handlers that succeeded while the poller waited for their slot: its
        # next receive acks them (one request for both; one queue only).
        self._carried: List[str] = []
        self._closed = False
        self._polling = False
        self._line: Optional[PollLine] = None
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
        name = self.options.source.name
        self._line = PollLine(self.client._new_poll_http())
        pool = ThreadPoolExecutor(self.options.concurrency, thread_name_prefix=f"delayq-{name}")
        poller = threading.Thread(target=self._poll_loop, args=(pool,), daemon=True,
                                  name=f"delayq-poll-{name}")
        extender = threading.Thread(target=self._extend_loop, daemon=True,
                                    name=f"delayq-extend-{name}")
        poller.start()
        extender.start()
        try:
            # A timed wait, so that signal handlers run promptly in the main thread.
            while not self._stopping.wait(0.2):
                if not poller.is_alive():
                    break
        finally:
            self._stopping.set()
            self._cut_poll()
            self._shutdown(pool, poller, extender)
            self._line.close()
            for signum, previous in restore.items():
                signal.signal(signum, previous)
            self._finished.set()

    def start(self) -> "Worker":
        """Runs the worker in a background thread; :meth:`stop` ends it."""
        self._thread = threading.Thread(target=self.run,
                                        name=f"delayq-worker-{self.options.source.name}")
        self._thread.start()
        return self

    def request_stop(self) -> None:
        """Asks the worker to stop, without waiting (safe from a signal handler)."""
        self._stopping.set()

    def stop(self, wait: bool = True, timeout: Optional[Duration] = None) -> bool:
        """Stops the worker: no new deliveries, the long poll cut; running handlers get
        ``grace``, are settled, and what is left is released for other consumers at once.
        With ``wait``, returns once the worker has stopped (True) or ``timeout`` passed
        (False)."""
        seconds = None if timeout is None else duration_seconds(timeout, "timeout")
        self.request_stop()
        if not wait or not self._ran:
            return self._finished.is_set()
        return self._finished.wait(seconds)

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

    def _cut_poll(self) -> None:
        """Lets a long poll under way end on its own for a moment, and an answer that has
        begun to arrive be read; then cuts it."""
        settle = time.monotonic() + POLL_SETTLE
        give_up = settle + ANSWER_WAIT
        with self._cond:
            self._cond.notify_all()
            while self._polling:
                now = time.monotonic()
                if now >= give_up:
                    break
                if now < settle:
                    self._cond.wait(settle - now)
                elif self._line is not None and self._line.answering():
                    self._cond.wait(0.02)
                else:
                    break
            polling = self._polling
        if polling and self._line is not None:
            self._line.cut()

    def _shutdown(self, pool: ThreadPoolExecutor, poller: threading.Thread,
                  extender: threading.Thread) -> None:
        deadline = time.monotonic() + self.options.grace_s
        with self._cond:
            while self._jobs and time.monotonic() < deadline:
                self._cond.wait(max(0.0, deadline - time.monotonic()))
            # From here on the poller releases whatever it receives.
            self._closed = True
            unfinished = [j for j in self._jobs.values() if j.decide(JobState.RELEASED)]
        self._release([j.delivery for j in unfinished])
        self._extender_stop.set()
        extender.join()
        poller.join(self.options.poll_wait_s + 15.0)
        # Handlers still running (released) end on their own; their results are dropped.
        pool.shutdown(wait=False)

    def _release(self, deliveries: List[Delivery]) -> None:
        for queue, receipts in receipts_by_queue(deliveries).items():
            try:
                self.client.release_many(queue, receipts)
                log.info("released %d unfinished deliveries of %s", len(receipts), queue)
            except DelayqError as exc:
                log.warning("could not release %d deliveries of %s (they return after "
                            "their leases): %s", len(receipts), queue, exc)
                self._hooks.error(exc)

    # The three loops.

    def _poll_loop(self, pool: ThreadPoolExecutor) -> None:
        failures = 0
        while True:
            with self._cond:
                while (len(self._jobs) >= self.options.concurrency
                       and not self._stopping.is_set()):
                    self._cond.wait(0.2)
                if self._stopping.is_set():
                    break
                free = self.options.concurrency - len(self._jobs)
                acks, self._carried = self._carried, []
                self._polling = True
            claimed_at = time.monotonic()
            deliveries: List[Delivery] = []
            error: Optional[Exception] = None
            try:
                assert self._line is not None
                with self._line.polling(self.client._local):
                    deliveries = self._receive(free, acks)
            except Exception as exc:  # noqa: BLE001 - a worker outlives a bad answer
                error = exc
            finally:
                with self._cond:
                    self._polling = False
                    self._cond.notify_all()
            if error is not None:
                # Whether its acks were made is unknown: sent again, on their own.
                self._ack_on_their_own(acks)
                if self._stopping.is_set():
                    break  # cut by the stop
                failures += 1
                log.warning("receive from %s failed: %s", self.options.source.name, error)
                self._hooks.error(error)
                self._stopping.wait(min(5.0, 0.1 * 2 ** failures))
                continue
            failures = 0
            self._accept(deliveries, claimed_at, pool)
        with self._cond:
            acks, self._carried = self._carried, []
        self._ack_on_their_own(acks)

    def _receive(self, free: int, acks: List[str]) -> List[Delivery]:
        o = self.options
        single = o.source.single
        if single is None:
            return self.client.receive_many(queues=o.source.strict, weights=o.source.weights,
                                            max=free, lease=o.lease, wait=o.poll_wait)
        if acks:
            acked, deliveries = self.client.ack_and_receive(single, acks, max=free,
                                                            lease=o.lease, wait=o.poll_wait)
            report_lost_acks(acked)
            return deliveries
        return self.client.receive(single, max=free, lease=o.lease, wait=o.poll_wait)

    def _ack_on_their_own(self, receipts: List[str]) -> None:
        single = self.options.source.single
        if not receipts or single is None:
            return
        try:
            # One acked already (by a request whose answer was lost) answers ok False.
            self.client.ack_many(single, receipts)
        except DelayqError as exc:
            log.error("acking %d deliveries failed (they return after their leases): %s",
                      len(receipts), exc)
            self._hooks.error(exc)

    def _accept(self, deliveries: List[Delivery], claimed_at: float,
                pool: ThreadPoolExecutor) -> None:
        late: List[Delivery] = []
        with self._cond:
            for delivery in deliveries:
                if self._stopping.is_set() or self._closed:
                    late.append(delivery)
                    continue
                job = Job(delivery, self.options.lease_s, claimed_at)
                if job.lease_passed():
                    # Its answer came after its lease: it may be someone else's already.
                    log.warning("skipping %s: its lease passed before it started", delivery.id)
                    continue
                self._jobs[delivery.receipt] = job
                pool.submit(self._run_job, job)
        self._release(late)

    def _extend_loop(self) -> None:
        while not self._extender_stop.wait(self.options.extend_every_s):
            with self._cond:
                running = [j for j in self._jobs.values() if j.running]
            for queue, jobs in by_queue(running).items():
                for start in range(0, len(jobs), EXTEND_CHUNK):
                    self._extend(queue, jobs[start:start + EXTEND_CHUNK])

    def _extend(self, queue: str, jobs: List[Job]) -> None:
        sent_at = time.monotonic()
        try:
            results = self.client.extend_many(queue, [j.delivery.receipt for j in jobs],
                                              lease=self.options.lease)
        except DelayqError as exc:
            log.warning("extending %d leases failed: %s", len(jobs), exc)
            self._hooks.error(exc)
            for job in jobs:
                if job.lease_passed() and job.decide(JobState.LOST):
                    log.warning("lease of %s passed unrenewed", job.delivery.id)
            return
        ok = {r.receipt for r in results if r.ok}
        for job in jobs:
            if job.delivery.receipt in ok:
                job.lease_ends = sent_at + self.options.lease_s
            elif job.decide(JobState.LOST):
                log.warning("lease of %s was lost; its handler's result will be dropped",
                            job.delivery.id)

    # One delivery.

    def _run_job(self, job: Job) -> None:
        try:
            try:
                result = self.handler(job.delivery)
            except Exception as exc:  # noqa: BLE001 - any failure of the handler is a nack
                self._hooks.log_failure(job.delivery, exc)
                self._settle(job, exc)
                self._hooks.failed(job.delivery, exc)
            else:
                self._settle(job, None)
                self._hooks.completed(job.delivery, result)
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
        if exc is None and self.options.source.single is not None:
            with self._cond:
                # The poller waits for this job's slot: the receive it makes as this job
                # ends acks it.
                if (len(self._jobs) >= self.options.concurrency
                        and not self._stopping.is_set()):
                    self._carried.append(d.receipt)
                    return
        try:
            if exc is None:
                self.client.ack(d.queue, d.receipt)
            else:
                args = nack_args(exc, self.options.retry_after)
                self.client.nack(d.queue, d.receipt, args.error, retry_after=args.retry_after,
                                 dead=args.dead)
        except LeaseLostError:
            log.warning("%s: lease lost before it could be settled", d.id)
        except DelayqError as exc2:
            log.error("%s: settling failed (it returns after its lease): %s", d.id, exc2)
            self._hooks.error(exc2)
