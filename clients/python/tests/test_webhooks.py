"""Event webhooks: the client sets them, the real server calls a receiver on loopback (the
session server runs with --push-allow 127.0.0.1), and verify_webhook accepts the server's
own w1 signature and refuses a changed body, queue or event id, another key, an old time,
and a push's signature alone."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, Iterator, List, Tuple

import pytest

from delayq import Client, NotFoundError, Webhook, sign_webhook, verify_webhook
from serverproc import wait_until

Received = Tuple[Dict[str, str], bytes]


@pytest.fixture
def receiver() -> Iterator[Tuple[str, List[Received]]]:
    """An HTTP endpoint on a free loopback port that keeps every POST and answers 204."""
    received: List[Received] = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_the_servers_webhook_verifies_and_changes_do_not(
        client: Client, queue: str, receiver: Tuple[str, List[Received]]) -> None:
    url, received = receiver
    key = secrets.token_hex(16)
    hooks = client.set_webhooks(queue, [Webhook(url, ["acked"])], signing_keys=[key])
    assert hooks.webhooks == [Webhook(url, ("acked",))] and hooks.signing_keys == [key]
    assert client.get_webhooks(queue).webhooks == hooks.webhooks

    client.send(queue, {"order": 7}, id="w-7")
    [d] = client.receive(queue, wait="2s")
    client.ack(queue, d.receipt)
    [(headers, body)] = wait_until(lambda: list(received), 20, "the webhook's call")
    event = json.loads(body)
    assert (event["kind"], event["id"], event["queue"]) == ("acked", "w-7", queue)
    assert headers["delayq-event"] == "acked" and headers["delayq-event-id"] == event["cursor"]

    assert verify_webhook(headers, body, key)
    assert verify_webhook(headers, body, ["another-key-0123456789", key])  # while rotating
    assert not verify_webhook(headers, body.replace(b"w-7", b"w-8"), key)
    assert not verify_webhook({**headers, "delayq-queue": "other"}, body, key)
    assert not verify_webhook({**headers, "delayq-event-id": "1-0"}, body, key)
    assert not verify_webhook(headers, body, "another-key-0123456789")
    t = int(headers["delayq-signature"].split(",")[0].removeprefix("t="))
    later = datetime.fromtimestamp(t, timezone.utc) + timedelta(minutes=5, seconds=1)
    assert not verify_webhook(headers, body, key, now=later)
    assert verify_webhook(headers, body, key, timedelta(minutes=10), now=later)
    push_only = ",".join(p for p in headers["delayq-signature"].split(",")
                         if not p.startswith("w1="))
    assert not verify_webhook({**headers, "delayq-signature": push_only}, body, key)

    client.delete_webhooks(queue)
    with pytest.raises(NotFoundError):
        client.get_webhooks(queue)


def test_sign_webhook_is_the_documented_hmac() -> None:
    at = datetime.fromtimestamp(1_700_000_000, timezone.utc)
    signed = b"1700000000\norders\n1700000000000-0\n" + b'{"kind":"acked"}'
    expected = hmac.new(b"key", signed, hashlib.sha256).hexdigest()
    header = sign_webhook("key", "orders", "1700000000000-0", b'{"kind":"acked"}', at=at)
    assert header == f"t=1700000000,w1={expected}"
    headers = {"Delayq-Signature": header, "Delayq-Queue": "orders",
               "Delayq-Event-Id": "1700000000000-0"}
    assert verify_webhook(headers, b'{"kind":"acked"}', "key", now=at)
    assert not verify_webhook({}, b"", "key", now=at)
