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
from . import _admin, _consume, _ops, _produce  # noqa: F401

COVERED: Dict[str, List[str]] = _ops.COVERED

# "METHOD /path" -> why the client does not call it.
LEFT_OUT: Dict[str, str] = {
    "GET /metrics": "Prometheus text for a scraper, not an application call.",
    "GET /v1/processes": "Operator's upgrade tooling (which processes read which data "
                         "format); the delayq CLI and dashboard show it.",
    "GET /v1/queues/{queue}/format": "Operator's data-format upgrade progress; use the "
                                     "CLI (`delayq format show`).",
    "POST /v1/queues/{queue}/upgrade": "Data-format upgrades are a one-off operator step "
                                       "(`delayq format upgrade`), not application code.",
    "GET /v1/queues/{queue}/messages": "Browsing a state page by page with payload "
                                       "previews is the dashboard's view; applications "
                                       "get a message by id.",
    "GET /v1/queues/{queue}/events": "The event feed (JSON pages or a server-sent-events "
                                     "stream) needs a stream reader of its own; not in "
                                     "this client yet.",
    "GET /v1/queues/{queue}/groups": "Group fairness settings are operator tuning; "
                                     "sending with a group is covered (send(group=...)).",
    "GET /v1/queues/{queue}/groups/{group}": "As the group list: operator tuning.",
    "PATCH /v1/queues/{queue}/groups/{group}": "As the group list: operator tuning.",
    "GET /v1/queues/{queue}/schedules": "Recurring schedules are set up once by an "
                                        "operator (CLI or dashboard), not per request.",
    "PUT /v1/queues/{queue}/schedules/{name}": "As the schedule list: operator setup.",
    "GET /v1/queues/{queue}/schedules/{name}": "As the schedule list: operator setup.",
    "PATCH /v1/queues/{queue}/schedules/{name}": "As the schedule list: operator setup.",
    "DELETE /v1/queues/{queue}/schedules/{name}": "As the schedule list: operator setup.",
    "POST /v1/queues/{queue}/schedules/{name}/backfill": "As the schedule list: an "
                                                         "operator's repair step.",
    "PUT /v1/queues/{queue}/webhooks": "Event webhooks are set up once by an operator; "
                                       "their requests verify like pushes (verify_push "
                                       "does not cover their body format).",
    "GET /v1/queues/{queue}/webhooks": "As setting webhooks: operator setup.",
    "DELETE /v1/queues/{queue}/webhooks": "As setting webhooks: operator setup.",
}


def covered_routes() -> Dict[str, List[str]]:
    """A copy of route -> client method names."""
    return {route: list(names) for route, names in COVERED.items()}
