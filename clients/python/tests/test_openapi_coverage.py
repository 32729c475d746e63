"""Every operation of the running server's OpenAPI document is either covered by the client
or left out on purpose with a reason; a route added to the server without either fails here.
Also: both clients have each covered method, with the same signature."""

from __future__ import annotations

import inspect
from typing import Set

import httpx

from delayq import AsyncClient, Client
from delayq.routes import COVERED, LEFT_OUT
from serverproc import ServerProcess

METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def server_operations(server: ServerProcess) -> Set[str]:
    doc = httpx.get(f"{server.url}/openapi.json", timeout=10).json()
    return {f"{method.upper()} {path}" for path, item in doc["paths"].items()
            for method in item if method in METHODS}


def test_every_server_operation_is_covered_or_left_out_with_a_reason(
        server: ServerProcess) -> None:
    operations = server_operations(server)
    assert len(operations) > 30, "the document lists the server's operations"
    unaccounted = operations - set(COVERED) - set(LEFT_OUT)
    assert not unaccounted, (
        "operations neither covered by the client nor in routes.LEFT_OUT: "
        f"{sorted(unaccounted)}")
    stale = (set(COVERED) | set(LEFT_OUT)) - operations
    assert not stale, f"the client names operations the server does not have: {sorted(stale)}"
    assert not set(COVERED) & set(LEFT_OUT), "an operation is both covered and left out"
    for route, reason in LEFT_OUT.items():
        assert reason.strip() and "\n" not in reason, f"{route}: give a one-line reason"


def test_both_clients_have_every_covered_method_with_one_signature() -> None:
    for route, names in COVERED.items():
        for name in names:
            sync_method = getattr(Client, name, None)
            async_method = getattr(AsyncClient, name, None)
            assert callable(sync_method), f"Client.{name} ({route}) is missing"
            assert inspect.iscoroutinefunction(async_method), \
                f"AsyncClient.{name} ({route}) is missing or not async"
            assert inspect.signature(sync_method) == inspect.signature(async_method), name
