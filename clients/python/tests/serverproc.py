"""Starting and stopping a real ``delayq serve`` for the tests, and waiting on conditions.

Each server gets a free loopback port and a fresh data directory, so its embedded Redis is
private (a unix socket in that directory): no test touches port 6379 or any Redis already
running. A server counts as up only once its own log says it serves on its port and
``/healthz`` answers there, so a port taken by someone else cannot pass for ours.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable, List, Optional, TypeVar

import httpx

REPO = Path(__file__).resolve().parents[3]
DEFAULT_BIN = REPO / "target" / "release" / "delayq"

T = TypeVar("T")


def delayq_bin() -> str:
    """The server binary: ``$DELAYQ_BIN``, else the workspace's release build."""
    return os.environ.get("DELAYQ_BIN") or str(DEFAULT_BIN)


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(check: Callable[[], Optional[T]], timeout: float, what: str,
               interval: float = 0.02) -> T:
    """Polls ``check`` until it gives something truthy, which it returns; fails the test
    after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class ServerProcess:
    """One ``delayq serve`` child process with its own port and data directory."""

    def __init__(self, extra_args: Optional[List[str]] = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._tmp = tempfile.TemporaryDirectory(prefix="delayq-pytest-")
        self.data_dir = Path(self._tmp.name) / "data"
        self.log_path = Path(self._tmp.name) / "server.log"
        self.args = [delayq_bin(), "serve", "--listen", f"127.0.0.1:{self.port}",
                     "--data-dir", str(self.data_dir), *(extra_args or [])]
        self.proc: Optional["subprocess.Popen[bytes]"] = None

    def start(self, timeout: float = 20.0) -> "ServerProcess":
        binary = Path(self.args[0])
        if not binary.is_file():
            raise RuntimeError(f"no delayq binary at {binary}: build it or set DELAYQ_BIN")
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL)
        log.close()
        banner = f"serving on {self.url}"
        try:
            wait_until(lambda: self._up(banner), timeout, f"delayq serve on {self.url}")
        except AssertionError:
            self.stop()
            raise AssertionError(f"delayq serve did not come up:\n{self.log()}") from None
        return self

    def _up(self, banner: str) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"delayq serve exited ({self.proc.returncode}):\n{self.log()}")
        if banner not in self.log():
            return False
        try:
            return httpx.get(f"{self.url}/healthz", timeout=1.0).status_code == 200
        except httpx.HTTPError:
            return False

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def redis_pid(self) -> int:
        """The process id of this server's embedded redis-server (its child)."""
        assert self.proc is not None
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # "pid (comm) state ppid ...": comm may hold spaces, so split after its ')'.
            comm = stat[stat.index("(") + 1:stat.rindex(")")]
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
            if ppid == self.proc.pid and comm.startswith("redis-server"):
                return int(entry.name)
        raise AssertionError("the server's redis-server child was not found")

    def stop(self, timeout: float = 15.0) -> None:
        """SIGTERM, as an operator would (the server then stops its Redis); SIGKILL only if
        it does not stop in time."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._tmp.cleanup()
