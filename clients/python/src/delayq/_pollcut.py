"""A worker's long poll, over a connection of its own, which a stop can end at once without
stranding an answer already on its way.

A thread blocked in a socket read cannot be interrupted, and closing the httpx client under
it does not wake it either: it waits out the poll. So each worker polls over a connection
pool of its own (one connection, made like its client's), learns that connection's socket
from httpcore's ``trace`` request extension as it connects, and :meth:`PollLine.cut` shuts
the socket down: the read ends at once with an error, and the server drops a long poll
whose client has gone. (The asyncio worker cancels its poll task instead; it uses the line
to look at the socket.)

Cutting a poll whose answer is being written would leave the messages it claimed unseen
until their leases end, so a stop first lets the poll end on its own for a moment, and
then, while :meth:`PollLine.answering` sees bytes of an answer waiting on the socket, reads
it rather than cutting it (a process slowed down by its machine's load reads late).

The sync client routes the requests of a thread inside :meth:`PollLine.polling` over the
line (through a thread-local it reads); the async client those of a task that set
:data:`delayq.aio.POLL_LINE`. A client given its own ``http_client`` has no line to make:
its polls go through that client and are waited out.
"""

from __future__ import annotations

import contextlib
import select
import socket
import threading
from typing import Any, Dict, Iterator, Optional

__all__ = ["PollLine", "ANSWER_WAIT"]

# httpcore's trace events whose return value is the connection's network stream.
_CONNECTED = (".connect_tcp.complete", ".connect_unix_socket.complete",
              ".start_tls.complete")

# How long a stop waits for an answer that has begun to arrive, at most.
ANSWER_WAIT = 2.0


class PollLine:
    """One poller's own connection to the server. ``http`` is an ``httpx.Client`` or
    ``httpx.AsyncClient`` of its own, or None (polls go through the client's own)."""

    def __init__(self, http: Any) -> None:
        self.http = http
        self._lock = threading.Lock()
        self._stream: Any = None
        self.cut_done = False

    @property
    def extensions(self) -> Optional[Dict[str, Any]]:
        """Request extensions (sync) that report this line's connection as it is made."""
        return {"trace": self._trace} if self.http is not None else None

    @property
    def async_extensions(self) -> Optional[Dict[str, Any]]:
        """The same for httpx's async client, whose trace hook is a coroutine."""
        return {"trace": self._atrace} if self.http is not None else None

    def _trace(self, name: str, info: Dict[str, Any]) -> None:
        if name.endswith(_CONNECTED) and info.get("return_value") is not None:
            with self._lock:
                self._stream = info["return_value"]
                late = self.cut_done
            if late:
                # Cut while it was connecting: end it before the request goes out.
                self._shutdown(info["return_value"])

    async def _atrace(self, name: str, info: Dict[str, Any]) -> None:
        self._trace(name, info)

    def _socket(self) -> Optional[socket.socket]:
        with self._lock:
            stream = self._stream
        if stream is None:
            return None
        try:
            sock = stream.get_extra_info("socket")
        except (AttributeError, OSError):
            return None
        return sock if isinstance(sock, socket.socket) else None

    @contextlib.contextmanager
    def polling(self, local: threading.local) -> Iterator[None]:
        """The sync client's requests of this thread go over the line while inside
        (``local`` is the client's thread-local)."""
        previous = getattr(local, "line", None)
        local.line = self
        try:
            yield
        finally:
            local.line = previous

    def answering(self) -> bool:
        """True when bytes of an answer wait on the line's socket, unread."""
        sock = self._socket()
        if sock is None:
            return False
        try:
            readable, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return False
        return bool(readable)

    def cut(self) -> None:
        """Ends the poll under way at once, and any the line would make after."""
        with self._lock:
            self.cut_done = True
            stream = self._stream
        if stream is not None:
            self._shutdown(stream)

    @staticmethod
    def _shutdown(stream: Any) -> None:
        try:
            sock = stream.get_extra_info("socket")
            if sock is not None:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass  # already closed: nothing to cut

    def close(self) -> None:
        if self.http is not None:
            self.http.close()

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()
