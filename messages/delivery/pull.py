"""The pull: one attempt of a long-poll.

An attempt claims (`claims`). When it claims nothing and the pull may still wait, it says how
long to wait before the next attempt: the fallback poll, or until the group's next delayed
message comes due. The wait itself happens outside, on the broker's event loop, woken early
by a wake hint (`mqcenter/longpoll.py`). The database decides who holds a message; a wake
hint only says "look again", so a lost one costs at most the fallback interval.
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.utils import timezone

from messages.delivery.claims import messages_claim
from messages.models import Message
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from registry.wakeups import wakeup_hub

# A pull that comes back full wakes this many more waiters of its group: a big produce
# reaches every waiter in a few rounds, and one message does not wake them all.
WAKE_MORE = 2


class PullAttempt(NamedTuple):
    messages: list[Message]
    # Nothing claimed and the pull may wait: seconds until the next attempt. None: answer now.
    wait: float | None


def messages_pull(
    *, principal: Principal, topic: str, group: str, consumer: str, max_messages: int, wait_remaining: float,
) -> PullAttempt:
    """Claim up to `max_messages` for `consumer`; with none claimed and `wait_remaining`
    seconds of the pull's wait left, how long to wait before trying again."""
    principal.require("consume", topic)
    claim = messages_claim(principal=principal, topic=topic, group=group, consumer=consumer,
                           max_messages=max_messages)
    if claim.messages:
        metrics.delivered.labels(topic, group).inc(len(claim.messages))
        if len(claim.messages) >= max_messages:
            wakeup_hub().notify_local([(topic, group)], limit=WAKE_MORE)
        return PullAttempt(claim.messages, None)
    if wait_remaining <= 0:
        return PullAttempt([], None)
    return PullAttempt([], _wait_timeout(wait_remaining, claim.next_due))


def _wait_timeout(remaining: float, next_due: datetime | None) -> float:
    """How long an empty pull waits before claiming again, wake hints aside."""
    timeout = min(remaining, wakeup_hub().fallback_seconds())
    if next_due is not None:
        due_in = (next_due - timezone.now()).total_seconds()
        timeout = max(0.0, min(timeout, due_in + 0.002))
    return timeout
