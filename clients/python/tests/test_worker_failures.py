"""How a worker reports outcomes: the error text a failed attempt is nacked with (type and
message first, the stack after, at most 4 KiB of valid UTF-8), failures logged with their
stack unless turned off, and the on_failed, on_completed and on_error hooks of both
workers (a hook that raises is logged, and the worker goes on)."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any, List, Tuple

import pytest

from delayq import (
    AsyncClient, AsyncWorker, Client, Delivery, PermanentFailure, RetryLater, Worker,
    error_text,
)
from serverproc import ServerProcess, wait_until


def raised(exc: BaseException) -> BaseException:
    """``exc`` with a traceback, as a handler's would have."""
    try:
        raise exc
    except BaseException as caught:  # noqa: BLE001
        return caught


def deep(n: int, message: str) -> None:
    if n == 0:
        raise KeyError(message)
    deeper(n - 1, message)


def deeper(n: int, message: str) -> None:
    deep(n, message)


def test_the_error_text_is_type_message_then_stack() -> None:
    text = error_text(raised(ValueError("bad amount")))
    lines = text.splitlines()
    assert lines[0] == "ValueError: bad amount"
    assert lines[1] == "Traceback (most recent call last):"
    assert 'raise exc' in text and "ValueError: bad amount" not in lines[1:]
    assert error_text(ValueError()) == "ValueError"  # never raised: no stack to give


def test_a_cause_is_part_of_the_stack() -> None:
    try:
        try:
            {}["order"]
        except KeyError as missing:
            raise PermanentFailure("no such order") from missing
    except PermanentFailure as exc:
        text = error_text(exc)
    assert text.splitlines()[0] == "PermanentFailure: no such order"
    assert "KeyError: 'order'" in text and "direct cause" in text


@pytest.mark.parametrize("message", ["plain", "é" * 3000, "€漢" * 900 + "x"])
def test_the_error_text_is_at_most_4_kib_of_utf8_keeping_the_innermost_frame(
        message: str) -> None:
    try:
        deep(60, message)
    except KeyError as exc:
        text = error_text(exc)
    data = text.encode("utf-8")
    assert len(data) <= 4096
    assert data.decode("utf-8") == text  # whole characters only
    assert text.startswith("KeyError: ")
    assert "raise KeyError(message)" in text  # the frame that raised survives the cut
    assert "frames cut" in text


def test_with_logging_off_a_failure_is_not_logged_but_hooks_run(
        client: Client, queue: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="delayq.worker")
    client.send(queue, "fails", id="quiet", max_attempts=1)
    client.send(queue, "works", id="fine")
    failed: List[Tuple[str, str]] = []
    completed: List[Tuple[str, Any]] = []

    def handle(d: Delivery) -> str:
        if d.payload == "fails":
            raise RuntimeError("expected")
        return f"done {d.id}"

    worker = Worker(client, queue, handle, poll_wait="1s", log_failures=False,
                    on_failed=lambda d, exc: failed.append((d.id, repr(exc))),
                    on_completed=lambda d, result: completed.append((d.id, result))).start()
    try:
        wait_until(lambda: len(failed) == 1 and len(completed) == 1, 10, "both outcomes")
    finally:
        assert worker.stop(timeout="10s")
    assert failed == [("quiet", "RuntimeError('expected')")]
    assert completed == [("fine", "done fine")]
    assert not [r for r in caplog.records if r.exc_info]
    # Its nack still carried the error.
    assert client.dead_letters(queue).items[0].last_error.startswith("RuntimeError: expected")


def test_a_retry_later_is_logged_as_a_warning(client: Client, queue: str,
                                              caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="delayq.worker")
    client.send(queue, "x", id="later")
    attempts: List[int] = []

    def handle(d: Delivery) -> None:
        attempts.append(d.attempt)
        if d.attempt == 1:
            raise RetryLater("not yet", retry_after="100ms")

    worker = Worker(client, queue, handle, poll_wait="1s").start()
    try:
        wait_until(lambda: attempts == [1, 2], 10, "the retry")
    finally:
        assert worker.stop(timeout="10s")
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.levelno == logging.WARNING and "not yet" in record.getMessage()


def test_on_error_hears_of_failed_receives_and_a_raising_hook_stops_nothing(
        client: Client, queue: str, caplog: pytest.LogCaptureFixture) -> None:
    errors: List[BaseException] = []
    got = threading.Event()
    bad = Worker(client, "no such name!", lambda d: None, poll_wait="1s",
                 on_error=errors.append).start()
    try:
        wait_until(lambda: errors, 10, "the failed receive")
    finally:
        assert bad.stop(timeout="10s")
    assert getattr(errors[0], "code", None) == "invalid_queue_name"

    caplog.set_level(logging.ERROR, logger="delayq.worker")
    client.send_batch(queue, ["a", "b"])
    seen: List[str] = []

    def explode(d: Delivery, result: Any) -> None:
        raise ValueError("a broken hook")

    def handle(d: Delivery) -> None:
        seen.append(d.payload)
        if len(seen) == 2:
            got.set()

    worker = Worker(client, queue, handle, poll_wait="1s", on_completed=explode).start()
    try:
        assert got.wait(10)
    finally:
        assert worker.stop(timeout="10s")
    assert sorted(seen) == ["a", "b"]
    assert any("on_completed hook raised" in r.getMessage() for r in caplog.records)
    assert client.stats(queue).in_flight == 0


def test_async_hooks_may_be_coroutines_and_failures_are_logged(
        server: ServerProcess, queue: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="delayq.worker")

    async def main() -> Tuple[List[str], List[str]]:
        async with AsyncClient(server.url) as client:
            await client.send(queue, "boom", id="a-fail", max_attempts=1)
            await client.send(queue, "ok", id="a-ok")
            failed: List[str] = []
            completed: List[str] = []
            done = asyncio.Event()

            async def on_failed(d: Delivery, exc: BaseException) -> None:
                failed.append(f"{d.id}: {exc}")
                if completed:
                    done.set()

            async def on_completed(d: Delivery, result: Any) -> None:
                completed.append(f"{d.id}: {result}")
                if failed:
                    done.set()

            async def handle(d: Delivery) -> int:
                if d.payload == "boom":
                    raise LookupError("no row")
                return 42

            worker = AsyncWorker(client, queue, handle, concurrency=2, poll_wait="1s",
                                 on_failed=on_failed, on_completed=on_completed)
            task = asyncio.create_task(worker.run())
            await asyncio.wait_for(done.wait(), 10)
            await worker.stop()
            await task
            dead = (await client.dead_letters(queue)).items[0]
            assert dead.last_error is not None
            assert dead.last_error.splitlines()[0] == "LookupError: no row"
            return failed, completed

    failed, completed = asyncio.run(main())
    assert failed == ["a-fail: no row"] and completed == ["a-ok: 42"]
    [record] = [r for r in caplog.records if r.exc_info]
    assert isinstance(record.exc_info and record.exc_info[1], LookupError)
