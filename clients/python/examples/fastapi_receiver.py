"""A push receiver with FastAPI: the endpoint a push queue's target points at.

It checks every request with :func:`delayq.verify_push` against the raw body (before any
parsing: a re-serialized body would not verify), answers 401 to anything unsigned, forged or
too old (the server makes such a message a dead letter: a 4xx says "never"), and treats an
(queue, id, attempt) it has handled already as done, since a captured request replayed
within the tolerance would otherwise run twice. Handle each message id idempotently as well:
delivery is at least once.

Run it on its own::

    DELAYQ_PUSH_KEYS=<signing key>[,<old key>] \\
        uvicorn --factory fastapi_receiver:app_from_env --port 8080

then point a queue at it: ``client.set_push_target("webhooks",
"http://127.0.0.1:8080/hook", signing_keys=[key])`` (with ``delayq serve --push-allow
127.0.0.1`` for a loopback receiver).
"""

from __future__ import annotations

import asyncio
import os
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, Tuple, Union

from fastapi import FastAPI, Request, Response

from delayq import Duration, parse_duration, verify_push


@dataclass(frozen=True)
class Pushed:
    """One verified push: which message and attempt, its body, and every header."""

    queue: str
    id: str
    attempt: int
    body: bytes
    headers: Dict[str, str]


OnPush = Callable[[Pushed], Union[None, Awaitable[None]]]


def create_app(keys: Sequence[str], on_push: Optional[OnPush] = None,
               tolerance: Duration = timedelta(minutes=5), path: str = "/hook") -> FastAPI:
    """An app whose ``POST path`` takes pushes signed with any of ``keys``, calls
    ``on_push`` (a function or a coroutine function) with each new one, and keeps them in
    ``app.state.received``."""
    app = FastAPI(title="delayq push receiver")
    received: List[Pushed] = []
    # (queue, id, attempt) -> when first seen; forgotten once older than the tolerance,
    # after which verify_push refuses a replay of it anyway.
    seen: Dict[Tuple[str, str, str], float] = {}
    window = parse_duration(tolerance).total_seconds()
    app.state.received = received
    app.state.refused = 0

    @app.post(path)
    async def hook(request: Request) -> Response:
        body = await request.body()
        if not verify_push(request.headers, body, list(keys), tolerance):
            app.state.refused += 1
            return Response("bad or old signature", status_code=401)
        h = request.headers
        key = (h["delayq-queue"], h["delayq-message-id"], h["delayq-attempt"])
        now = time.monotonic()
        for old in [k for k, at in seen.items() if now - at > window]:
            del seen[old]
        if key in seen:
            return Response(status_code=200)  # a replay of what was handled: done
        seen[key] = now
        pushed = Pushed(key[0], key[1], int(key[2]), body, dict(h.items()))
        if on_push is not None:
            result: Any = on_push(pushed)
            if asyncio.iscoroutine(result):
                await result
        received.append(pushed)
        return Response(status_code=204)

    return app


def app_from_env() -> FastAPI:
    """The app with the keys of ``DELAYQ_PUSH_KEYS`` (comma-separated), for uvicorn's
    ``--factory``."""
    keys = [k for k in os.environ.get("DELAYQ_PUSH_KEYS", "").split(",") if k]
    if not keys:
        raise SystemExit("set DELAYQ_PUSH_KEYS to the push target's signing key(s)")
    return create_app(keys, on_push=lambda p: print(p.queue, p.id, p.attempt,
                                                    p.body.decode(errors="replace")))


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(app_from_env(), host="127.0.0.1", port=int(os.environ.get("PORT", "8080")))
