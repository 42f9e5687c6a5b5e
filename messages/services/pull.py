"""The long-poll pull: register a waiter, claim, and while nothing is claimed wait for a
wake hint or the fallback poll, until the wait ends.

The database decides who holds a message (`claims`); a wake hint only says "look again".
The waiter is registered before each claim, so a produce that commits between the claim
and the wait still wakes it; a lost hint (Redis down, a publish that raced a subscribe)
costs at most the fallback interval, never a message.
"""

from __future__ import annotations

import asyncio
import time
from datetime import datetime

from django.utils import timezone

from messages.models import Message
from messages.services.claims import messages_claim
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from mqcenter.core.db import db_run
from registry.wakeups import LoopEvent, wakeup_hub

# A pull that comes back full wakes this many more waiters of its group: a big produce
# reaches every waiter in a few rounds, and one message does not wake them all.
WAKE_MORE = 2


async def messages_pull(
    *,
    principal: Principal,
    topic: str,
    group: str,
    consumer: str,
    max_messages: int,
    wait_seconds: float,
) -> list[Message]:
    """Claim up to `max_messages`, waiting up to `wait_seconds` for the first one. The wait
    holds no thread and no database connection; each claim runs on the database threads."""
    principal.require("consume", topic)
    started = time.monotonic()
    deadline = started + wait_seconds
    hub = wakeup_hub()
    with hub.waiter(topic, group, LoopEvent(asyncio.get_running_loop())) as wake:
        while True:
            wake.clear()
            claim = await db_run(
                messages_claim, principal=principal, topic=topic, group=group, consumer=consumer,
                max_messages=max_messages,
            )
            remaining = deadline - time.monotonic()
            if claim.messages or remaining <= 0:
                break
            await wake.wait(_wait_timeout(remaining, claim.next_due))
    metrics.pull_wait.observe(time.monotonic() - started)
    if claim.messages:
        metrics.delivered.labels(topic, group).inc(len(claim.messages))
        if len(claim.messages) >= max_messages:
            hub.notify_local([(topic, group)], limit=WAKE_MORE)
    return claim.messages


def _wait_timeout(remaining: float, next_due: datetime | None) -> float:
    """How long an empty pull waits before claiming again, wake hints aside: the fallback
    poll, or until the group's next delayed message comes due."""
    timeout = min(remaining, wakeup_hub().fallback_seconds())
    if next_due is not None:
        due_in = (next_due - timezone.now()).total_seconds()
        timeout = max(0.0, min(timeout, due_in + 0.002))
    return timeout
