"""Fixtures: one real delayq server for the session (pushes to loopback allowed), clients
of it, and a fresh queue name per test so that tests never see each other's messages."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path
from typing import Iterator

import pytest

from delayq import Client

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serverproc import ServerProcess  # noqa: E402


@pytest.fixture(scope="session")
def server() -> Iterator[ServerProcess]:
    proc = ServerProcess(["--push-allow", "127.0.0.1"]).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def client(server: ServerProcess) -> Iterator[Client]:
    with Client(server.url, timeout="10s") as c:
        yield c


@pytest.fixture
def queue() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"
