"""Push delivery: the real server pushes to the FastAPI example receiver (uvicorn on a free
loopback port), and verify_push accepts what it sent and refuses tampering and old
timestamps."""

from __future__ import annotations

import json
import secrets
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Dict

import httpx

from delayq import Client, NotFoundError, sign_push, verify_push
from serverproc import wait_until

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))

from background_server import BackgroundServer  # noqa: E402
from fastapi_receiver import Pushed, create_app  # noqa: E402


def at(unix_seconds: int) -> datetime:
    return datetime.fromtimestamp(unix_seconds, timezone.utc)


def delayq_headers(p: Pushed) -> Dict[str, str]:
    return {k: v for k, v in p.headers.items() if k.startswith("delayq-")}


def test_S7_push_verify_accepts_the_servers_signature_and_refuses_changes(
        client: Client, queue: str) -> None:
    key = secrets.token_hex(16)
    app = create_app([key])
    with BackgroundServer(app) as receiver:
        target = client.set_push_target(queue, f"{receiver.url}/hook", signing_keys=[key],
                                        timeout="5s")
        assert target.signing_keys == [key]
        assert client.get_push_target(queue).url == f"{receiver.url}/hook"
        client.send(queue, {"order": 1234}, id="close-1234")
        [p] = wait_until(lambda: list(app.state.received), 15, "the push")
        assert (p.queue, p.id, p.attempt) == (queue, "close-1234", 1)
        assert json.loads(p.body) == {"order": 1234}
        assert app.state.refused == 0

        # What the receiver accepted verifies here too; any change does not.
        assert verify_push(p.headers, p.body, key)
        assert not verify_push(p.headers, p.body.replace(b"1234", b"1235"), key)
        assert not verify_push(p.headers, p.body, "another-key-0123456789")
        assert not verify_push({**p.headers, "delayq-attempt": "2"}, p.body, key)
        assert not verify_push({**p.headers, "delayq-message-id": "close-9"}, p.body, key)
        assert not verify_push({**p.headers, "delayq-queue": "other-queue"}, p.body, key)

        # Old timestamps: the server's own past the tolerance, or one re-signed long ago.
        t = int(p.headers["delayq-signature"].split(",")[0].removeprefix("t="))
        assert verify_push(p.headers, p.body, key, now=at(t + 299))
        assert not verify_push(p.headers, p.body, key, now=at(t + 301))
        old = sign_push(key, queue, p.id, p.attempt, p.body, at=at(int(time.time()) - 600))
        assert not verify_push({**p.headers, "delayq-signature": old}, p.body, key)
        assert verify_push({**p.headers, "delayq-signature": old}, p.body, key,
                           tolerance=timedelta(minutes=15))

        # The receiver refuses a tampered copy, and does not run a replay twice.
        forged = httpx.post(f"{receiver.url}/hook", headers=delayq_headers(p),
                            content=p.body.replace(b"1234", b"1235"))
        assert forged.status_code == 401 and app.state.refused == 1
        replay = httpx.post(f"{receiver.url}/hook", headers=delayq_headers(p), content=p.body)
        assert replay.status_code == 200 and len(app.state.received) == 1

        # The receiver's 2xx acked it.
        wait_until(lambda: gone(client, queue, "close-1234"), 10, "the ack of the push")
    client.delete_push_target(queue)
    try:
        client.get_push_target(queue)
        raise AssertionError("the target must be gone")
    except NotFoundError:
        pass


def gone(client: Client, queue: str, id: str) -> bool:
    try:
        client.get(queue, id)
        return False
    except NotFoundError:
        return True


def test_while_keys_rotate_the_old_key_still_verifies(client: Client, queue: str) -> None:
    old, new = secrets.token_hex(16), secrets.token_hex(16)
    app = create_app([old])  # a receiver not yet given the new key
    with BackgroundServer(app) as receiver:
        client.set_push_target(queue, f"{receiver.url}/hook", signing_keys=[new, old])
        client.send(queue, "rotating")
        [p] = wait_until(lambda: list(app.state.received), 15, "the push")
        assert p.headers["delayq-signature"].count("v2=") == 2
        assert verify_push(p.headers, p.body, [new]) and verify_push(p.headers, p.body, old)
    client.delete_push_target(queue)


def test_known_answers_match_the_servers() -> None:
    # The server's own test vector (crates/delayq-server/src/push/signature.rs).
    headers = {
        "Delayq-Signature": sign_push("key", "orders", "close-1234", 2, b"body", at=at(1)),
        "Delayq-Queue": "orders",
        "Delayq-Message-Id": "close-1234",
        "Delayq-Attempt": "2",
    }
    assert headers["Delayq-Signature"] == (
        "t=1,v1=91b5374b153842ad05b2c4eab9349b8321b14703165bd3fb8b034dfb8be98ae5,"
        "v2=80755dc13779b3023f019d27621185b6d160d67896fd5fa599eed19b4dfc5dd0")
    assert verify_push(headers, b"body", "key", now=at(1))
    # A v1 alone (the deprecated body-only signature) is not accepted.
    v1_only = ",".join(p for p in headers["Delayq-Signature"].split(",")
                       if not p.startswith("v2="))
    assert not verify_push({**headers, "Delayq-Signature": v1_only}, b"body", "key", now=at(1))
    assert not verify_push({**headers, "Delayq-Signature": "t=x,v2=zz"}, b"body", "key")
    assert not verify_push({}, b"body", "key")


def test_a_signature_that_is_not_ascii_is_false_not_an_error() -> None:
    # Issue 49, item 16: hmac.compare_digest raises TypeError on a str that is not ASCII.
    headers = {
        "Delayq-Queue": "orders",
        "Delayq-Message-Id": "close-1234",
        "Delayq-Attempt": "2",
    }
    for signature in ["t=1,v2=é" + "0" * 63, "t=١,v2=" + "0" * 64, "t=1,v2=\udcff\ud800"]:
        assert not verify_push({**headers, "Delayq-Signature": signature}, b"body", "key",
                               now=at(1))
    lone = {**headers, "Delayq-Message-Id": "\ud800"}
    assert not verify_push({**lone, "Delayq-Signature": "t=1,v2=" + "0" * 64}, b"body", "key",
                           now=at(1))
