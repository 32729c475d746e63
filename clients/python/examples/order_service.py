"""A small shop's order service on delayq, end to end through the Python client.

- Placing an order sends "close order N unless paid" to a pull queue, delayed (15 minutes in
  real life, half a second here), with the caller id ``close-N`` so a retried send is
  harmless and payment can cancel it.
- Paying cancels that message.
- A :class:`delayq.Worker` takes the due messages, closes each order still unpaid, and
  sends a "closed" notification to a second queue, which the server pushes to this
  service's own FastAPI receiver (``fastapi_receiver.py``), checked with ``verify_push``.

Run it against a server started with ``delayq serve --push-allow 127.0.0.1``::

    python examples/order_service.py --url http://127.0.0.1:7400

It exits 0 once every unpaid order is closed and each closing was pushed back, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))

from background_server import BackgroundServer  # noqa: E402
from fastapi_receiver import Pushed, create_app  # noqa: E402

from delayq import DEFAULT_URL, Client, Delivery, Worker  # noqa: E402


class Shop:
    """The service's state: orders by number, and the notifications pushed to it."""

    def __init__(self) -> None:
        self.orders: Dict[int, str] = {}
        self.notifications: List[Dict[str, object]] = []
        self._lock = threading.Lock()

    def place(self, client: Client, queue: str, order: int, close_after: timedelta) -> None:
        with self._lock:
            self.orders[order] = "placed"
        client.send(queue, {"order": order}, id=f"close-{order}", delay=close_after)

    def pay(self, client: Client, queue: str, order: int) -> None:
        with self._lock:
            self.orders[order] = "paid"
        client.cancel(queue, f"close-{order}")

    def closer(self, client: Client, notify_queue: str) -> Callable[[Delivery], None]:
        """The worker's handler: close the order if still unpaid, then say so."""

        def close_if_unpaid(delivery: Delivery) -> None:
            order = int(delivery.payload["order"])
            with self._lock:
                if self.orders.get(order) != "placed":
                    return  # paid (or closed by an earlier attempt): nothing to do
                self.orders[order] = "closed"
            client.send(notify_queue, {"order": order, "event": "closed"},
                        id=f"closed-{order}")

        return close_if_unpaid

    def on_push(self, pushed: Pushed) -> None:
        with self._lock:
            self.notifications.append(json.loads(pushed.body))

    def count(self, status: str) -> int:
        with self._lock:
            return sum(1 for s in self.orders.values() if s == status)


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("DELAYQ_URL", DEFAULT_URL))
    parser.add_argument("--token", default=os.environ.get("DELAYQ_TOKEN"),
                        help="an admin token, if the server has tokens")
    parser.add_argument("--prefix", default="shop", help="prefix of the two queues' names")
    parser.add_argument("--orders", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=30.0)
    args = parser.parse_args(argv)

    close_queue, notify_queue = f"{args.prefix}-close-unpaid", f"{args.prefix}-notifications"
    shop = Shop()
    key = secrets.token_hex(16)
    receiver_app = create_app([key], on_push=shop.on_push)
    unpaid = args.orders - 1

    with Client(args.url, token=args.token) as client, BackgroundServer(receiver_app) as rx:
        client.set_push_target(notify_queue, f"{rx.url}/hook", signing_keys=[key])
        worker = Worker(client, close_queue, shop.closer(client, notify_queue),
                        concurrency=4, lease="10s", poll_wait="1s").start()
        try:
            for order in range(args.orders):
                shop.place(client, close_queue, order, close_after=timedelta(milliseconds=500))
            shop.pay(client, close_queue, 0)
            done = wait_for(lambda: shop.count("closed") == unpaid
                            and len(shop.notifications) == unpaid, args.timeout)
        finally:
            worker.stop(timeout="15s")
            client.delete_push_target(notify_queue)

    print(f"placed {args.orders} orders, paid {shop.count('paid')}, "
          f"closed {shop.count('closed')} unpaid, "
          f"{len(shop.notifications)} closing notifications pushed and verified")
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
