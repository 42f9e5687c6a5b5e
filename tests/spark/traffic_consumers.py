"""The SDK consumer the report-figures test runs in a real process
(``python -m mqclient run tests.spark.traffic_consumers``).

Each message's data says what its handler does: ``{"reject": reason}`` raises Reject (a dead
letter at once); ``{"fails": [reason, ...]}`` raises RuntimeError(reason) on those attempts
(the broker retries per the topic's policy); ``{"work": seconds}`` is the handler's work
before it succeeds.
"""

from __future__ import annotations

import time

from mqclient import Message, Reject, consumer

SUBSCRIPTIONS = (("orders", "default"), ("mail", "default"))


def handle(message: Message) -> str:
    data = message.data
    if data.get("reject"):
        raise Reject(data["reject"])
    fails = data.get("fails", [])
    if message.attempt <= len(fails):
        raise RuntimeError(fails[message.attempt - 1])
    time.sleep(data.get("work", 0))  # the handler's work: processing times differ
    return "ok"


for _topic, _group in SUBSCRIPTIONS:
    consumer(_topic, group=_group, concurrency=2)(handle)
