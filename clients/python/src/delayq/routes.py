"""Which of the server's API operations this client covers, and which it leaves out and why.

:data:`COVERED` is filled by the ``@operation`` decorator of each request builder, so it
cannot claim a method that does not make that request. The test
``tests/test_openapi_coverage.py`` reads the running server's ``/openapi.json`` and fails
when an operation is in neither mapping (a route added to the server and not to the
client), or when either mapping names one the server no longer has.
"""

from __future__ import annotations

from typing import Dict, List

# Importing the builders registers their routes.
from . import (  # noqa: F401
    _admin, _consume, _events, _groups, _ops, _produce, _schedules, _settings, _webhooks,
)

COVERED: Dict[str, List[str]] = _ops.COVERED

# "METHOD /path" -> why the client does not call it.
LEFT_OUT: Dict[str, str] = {
    "GET /metrics": "Prometheus text for a scraper, not an application call.",
    "GET /v1/processes": "Operator's upgrade tooling (which processes read which data "
                         "format); the delayq CLI and dashboard show it.",
    "GET /v1/audit": "Who did what on the server: an operator's read; the delayq CLI "
                     "(`delayq audit`) and the dashboard's audit log show it.",
    "POST /v1/queues/{queue}/rotate-keys": "Sealing a queue's stored payloads again with a "
                                           "new key: an operator's step; the CLI "
                                           "(`delayq keys rotate`) and the dashboard do it.",
    "GET /v1/queues/{queue}/format": "Operator's data-format upgrade progress; use the "
                                     "CLI (`delayq format show`).",
    "POST /v1/queues/{queue}/upgrade": "Data-format upgrades are a one-off operator step "
                                       "(`delayq format upgrade`), not application code.",
    "GET /v1/queues/{queue}/messages": "Browsing a state page by page with payload "
                                       "previews is the dashboard's view; applications "
                                       "get a message by id.",
}


def covered_routes() -> Dict[str, List[str]]:
    """A copy of route -> client method names."""
    return {route: list(names) for route, names in COVERED.items()}
