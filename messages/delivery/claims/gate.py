"""A claim's answer, and the gate of a group's flow control.

Flow control is decided in the claim's transaction under the group row's lock, so it holds
across every broker process: `paused` takes nothing; `max_in_flight` takes no more than the
group's free slots (its RUNNING messages counted under the lock); `rate_per_second` takes
no more than the tokens of the bucket kept on the group's row, refilled at that rate, with
room for a tenth of a second's deliveries (at least one). The bucket is state, so it lives
in the database with the group; Redis would be a second copy of a decision.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings

from messages.delivery import sql
from messages.models import Message


class Claim(NamedTuple):
    messages: list[Message]
    # When nothing was claimed: when to look again at the earliest (a delayed message comes
    # due, or the rate limit has a token again); None: when woken, or the fallback poll.
    next_due: datetime | None


class Gate(NamedTuple):
    """How many the claim may take now, and the locked flow columns."""

    limit: int
    flow: sql.GroupFlow | None
    retry_at: datetime | None  # with limit 0 from the rate limit: when a token is back


def gate_open(group_pk: int, topic: str, group: str, *, limit: int, now: datetime) -> Gate:
    """Lock the group's row (inside the caller's transaction) and apply its flow control."""
    flow = sql.lock_group(group_pk)
    if flow is None or flow.paused:  # paused since this process cached the group
        return Gate(0, flow, now + timedelta(seconds=settings.MQ_TOPIC_CACHE_SECONDS))
    if flow.max_in_flight is not None:
        limit = min(limit, flow.max_in_flight - sql.running_count(topic, group))
    if flow.rate_per_second is not None and limit > 0:
        tokens = _tokens(flow, now)
        if tokens < 1:
            wait = (1 - tokens) / flow.rate_per_second
            return Gate(0, flow, now + timedelta(seconds=wait))
        limit = min(limit, math.floor(tokens))
    return Gate(max(limit, 0), flow, None)


def gate_spend(group_pk: int, gate: Gate, taken: int, now: datetime) -> None:
    """Take `taken` tokens from a rate-limited group's bucket (under the same lock)."""
    if gate.flow is None or gate.flow.rate_per_second is None:
        return
    sql.spend_tokens(group_pk, _tokens(gate.flow, now) - taken, now)


def bucket_size(rate: float) -> float:
    """The rate limit's burst: a tenth of a second's deliveries, at least one."""
    return max(1.0, rate / 10)


def _tokens(flow: sql.GroupFlow, now: datetime) -> float:
    rate = flow.rate_per_second or 0.0
    size = bucket_size(rate)
    if flow.rate_refilled_at is None:
        return size
    elapsed = max(0.0, (now - flow.rate_refilled_at).total_seconds())
    return min(size, flow.rate_tokens + elapsed * rate)
