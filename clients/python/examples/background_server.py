"""Running an ASGI app (the push receiver) with uvicorn in a background thread, so that one
process can hold the receiver, a worker and a producer: the example service and the tests
use it."""

from __future__ import annotations

import socket
import threading
import time
from types import TracebackType
from typing import Any, Optional, Type

import uvicorn


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BackgroundServer:
    """``with BackgroundServer(app) as srv:`` serves ``app`` on ``srv.url`` until the block
    ends."""

    def __init__(self, app: Any, port: Optional[int] = None, host: str = "127.0.0.1") -> None:
        self.port = port or free_port()
        self.url = f"http://{host}:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning",
                                lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True,
                                        name=f"uvicorn-{self.port}")

    def __enter__(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"uvicorn did not start on {self.url}")
            time.sleep(0.01)
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]],
                 exc: Optional[BaseException], tb: Optional[TracebackType]) -> None:
        self._server.should_exit = True
        self._thread.join(10)
