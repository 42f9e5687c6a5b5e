"""The consumer module the end-to-end tests run in real processes
(``python -m mqclient run sdk_e2e_consumers``), configured by ``E2E_*`` variables:

``E2E_TOPIC``; ``E2E_GROUPS`` (comma-separated, one subscription each); ``E2E_CONCURRENCY``;
``E2E_TIMEOUT`` (the decorator's timeout); ``E2E_PREFETCH``; ``E2E_START`` (the
decorator's ``start``: the groups are created from there); ``E2E_SLEEP`` (seconds per
message) and ``E2E_SLEEP_FIRST`` (seconds on attempt 1 only); ``E2E_EVENTS`` (a file that
gets one JSON line per handler start and end). A message with key ``reject`` raises Reject;
one with key ``snooze`` raises Snooze(1) on its first attempt, one with key ``snooze-long``
Snooze(10**7) (longer than the broker allows).
"""

from __future__ import annotations

import json
import os
import time

from mqclient import Message, Reject, Snooze, consumer

TOPIC = os.environ["E2E_TOPIC"]
GROUPS = [g for g in os.environ.get("E2E_GROUPS", "default").split(",") if g]
EVENTS = os.environ["E2E_EVENTS"]
SLEEP = float(os.environ.get("E2E_SLEEP", "0"))
SLEEP_FIRST = float(os.environ.get("E2E_SLEEP_FIRST", str(SLEEP)))
TIMEOUT = float(os.environ["E2E_TIMEOUT"]) if os.environ.get("E2E_TIMEOUT") else None


def record(event: str, message: Message) -> None:
    line = (
        json.dumps(
            {
                "event": event,
                "id": message.id,
                "group": message.group,
                "attempt": message.attempt,
                "data": message.data,
                "pid": os.getpid(),
                "t": time.time(),
            }
        )
        + "\n"
    )
    fd = os.open(EVENTS, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())  # one O_APPEND write: lines from many processes never mix
    finally:
        os.close(fd)


def handle(message: Message) -> str:
    record("start", message)
    if message.key == "reject":
        raise Reject("e2e says no")
    if message.key == "snooze" and message.attempt == 1:
        raise Snooze(1, "e2e says later")
    if message.key == "snooze-long" and message.attempt == 1:
        raise Snooze(10**7, "e2e says much later")
    time.sleep(SLEEP_FIRST if message.attempt == 1 else SLEEP)
    record("end", message)
    return f"done by {os.getpid()}"


for _group in GROUPS:
    consumer(
        TOPIC,
        group=_group,
        concurrency=int(os.environ.get("E2E_CONCURRENCY", "4")),
        timeout=TIMEOUT,
        prefetch=int(os.environ.get("E2E_PREFETCH", "0")),
        start=os.environ.get("E2E_START") or None,
    )(handle)
