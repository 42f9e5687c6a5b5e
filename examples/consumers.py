"""Example consumers: run them with

    MQ_BROKERS=http://127.0.0.1:8000 MQ_TOKEN=... mqclient run examples.consumers

Two groups subscribe to the topic ``orders``: every order published without a group reaches
``billing`` and ``audit`` once each. Each handler receives a :class:`mqclient.Message`. Returning acks SUCCESS (a returned string
becomes the trace log), raising acks FAIL and the topic's retry policy applies (by default 3 retries, 10 s, 20 s and
40 s later), raising
:class:`mqclient.Reject` fails the message for good.
"""

from __future__ import annotations

import logging
import time

from mqclient import Message, Reject, consumer

logger = logging.getLogger(__name__)


@consumer("orders", group="billing", concurrency=4, timeout=30)
def charge(message: Message) -> str:
    """Charge an order; up to four orders are charged at once by this process."""
    order = message.data
    if not isinstance(order, dict) or "amount" not in order:
        # Retrying cannot fix a malformed order: send it straight to the dead letters.
        raise Reject(f"order without an amount: {order!r}")
    if order.get("declined"):
        raise RuntimeError(f"card declined for order {order.get('id')}")  # retried
    time.sleep(0.05)  # pretend to call the payment provider
    return f"charged {order['amount']} for order {order.get('id')} (attempt {message.attempt})"


@consumer("orders", group="audit", start="earliest")
def audit(message: Message) -> None:
    """A second group on the same topic: it receives its own copy of every publish. Created
    from ``earliest`` by the runner (an admin token), it also gets the orders published
    before it existed; once it exists, restarts do not replay them again."""
    logger.info("audit order %s key=%s headers=%s", message.id, message.key, message.headers)
