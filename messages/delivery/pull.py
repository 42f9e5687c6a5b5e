"""The pull: one attempt of a long-poll.

An attempt claims (`claims`). When it claims nothing and the pull may still wait, it says how
long to wait before the next attempt: the fallback poll, or until the group's next delayed
message comes due. The wait itself happens outside, on the broker's event loop, woken early
by a wake hint (`mqcenter/longpoll.py`). The database decides who holds a message; a wake
hint only says "look again", so a lost one costs at most the fallback interval.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any, NamedTuple

from django.utils import timezone

from messages.batches.progress import batch_wakes
from messages.delivery.acks import AckResult, AckWork, acks_carried, acks_committed, messages_ack
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
    # The outcomes of the acks the pull carried (`results`), None when it carried none.
    outcomes: list[dict[str, Any]] | None = None


def messages_pull(
    *, principal: Principal, topic: str, group: str, consumer: str, max_messages: int, wait_remaining: float,
    results: list[AckResult] | None = None,
) -> PullAttempt:
    """Claim up to `max_messages` for `consumer`; with none claimed and `wait_remaining`
    seconds of the pull's wait left, how long to wait before trying again.

    `results` (acks the pull carries, an extension of API.md) are applied first, in the
    claim's transaction: one commit for both (`acks.acks_carried`). A busy consumer's acks
    ride on its next pull instead of a request of their own. The pull's scope is checked
    first, so a pull that will be refused acks nothing."""
    principal.require("consume", topic)
    work: list[AckWork] = []
    now = timezone.now()

    def apply_acks() -> None:
        work[:] = [acks_carried(principal=principal, topic=topic, group=group, consumer=consumer,
                                results=results or [], now=now)]

    # A batch its acks complete wakes its callback's pulls after the claim's commit.
    with batch_wakes() if results else contextlib.nullcontext():
        claim = messages_claim(principal=principal, topic=topic, group=group, consumer=consumer,
                               max_messages=max_messages, before=apply_acks if results else None)
    outcomes = None
    if results:
        # A claim that ended before its transaction (a missing or paused topic) did not apply them.
        outcomes = acks_committed(work[0]) if work else messages_ack(principal=principal, consumer=consumer,
                                                                     results=results)
    if claim.messages:
        metrics.delivered.labels(topic, group).inc(len(claim.messages))
        if len(claim.messages) >= max_messages:
            wakeup_hub().notify_local([(topic, group)], limit=WAKE_MORE)
        return PullAttempt(claim.messages, None, outcomes)
    if wait_remaining <= 0:
        return PullAttempt([], None, outcomes)
    return PullAttempt([], wait_timeout(wait_remaining, claim.next_due), outcomes)


def wait_timeout(remaining: float, next_due: datetime | None) -> float:
    """How long an empty pull waits before claiming again, wake hints aside."""
    timeout = min(remaining, wakeup_hub().fallback_seconds())
    if next_due is not None:
        due_in = (next_due - timezone.now()).total_seconds()
        timeout = max(0.0, min(timeout, due_in + 0.002))
    return timeout
