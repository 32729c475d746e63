"""The examples run: the order service end to end as its own process, against the test
server."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from serverproc import ServerProcess

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_the_order_service_sends_works_and_gets_pushes(server: ServerProcess,
                                                       queue: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / "order_service.py"), "--url", server.url,
         "--prefix", queue, "--orders", "4", "--timeout", "20"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("placed 4 orders, paid 1, closed 3 unpaid, "
            "3 closing notifications pushed and verified") in done.stdout
