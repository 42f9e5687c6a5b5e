"""Several parked pulls of one (topic, group), woken together, claimed in one transaction.

A burst (one produce of a thousand messages while a thousand pulls wait) would otherwise
cost a claim transaction, and its commit, per woken pull. `messages_pull_many` takes the
deliverable rows for all of them with one locking SELECT and leases them with one UPDATE
(`lifecycle.lease_many`), each pull getting its share in claim order, up to its
`max_messages`; one commit. Only queue-mode groups without flow control are claimed
together; anything else (serial, sharded, flow control, fair keys, a paused or missing topic, a
principal that may not consume the topic) is answered None: that pull claims alone
(`pull.messages_pull`, which also answers its errors).
"""

from __future__ import annotations

from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.utils import timezone

from messages.delivery import expiry, lifecycle, sql
from messages.delivery.claims.aging import queue_claimable_rows
from messages.delivery.claims.queue import plain_queue
from messages.delivery.pull import PullAttempt, wait_timeout
from messages.models import Message, Status
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.core.auth import Principal
from mqcenter.core.db import retry_on_lock_conflict
from registry.services import rank_cache
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache
from topics.services import group_pull_record

# Pulls claimed for together that came back full wake this many more waiters each: a big
# produce reaches a thousand waiters in a few rounds, each one transaction.
WAKE_MORE_TOGETHER = 8


class PullSpec(NamedTuple):
    """What a parked pull asks for (as `messages_pull` takes it)."""

    principal: Principal
    topic: str
    group: str
    consumer: str
    max_messages: int


def messages_pull_many(specs: list[PullSpec], remaining: list[float]) -> list[PullAttempt | None]:
    """One attempt for each of these pulls (all of one topic and group), with `remaining`
    seconds of wait left each, as `messages_pull` would answer them one by one; None for
    a pull that must claim alone."""
    if not specs:
        return []
    topic, group = specs[0].topic, specs[0].group
    if any((s.topic, s.group) != (topic, group) for s in specs):
        raise ValueError("pulls claimed together share their topic and group")
    topic_row = topic_cache.get(topic)
    topic_group = topic_row.group_rows.get(group) if topic_row is not None else None  # type: ignore[attr-defined]
    together = plain_queue(topic_row, topic_group)
    answers: list[PullAttempt | None] = [None] * len(specs)
    batch = [i for i, s in enumerate(specs) if together
             and s.principal.may("consume", topic) and s.principal.may_biz(topic_row.biz_id)]  # type: ignore[union-attr]
    if batch:
        now = timezone.now()
        group_pull_record(topic_group, now)  # type: ignore[arg-type]
        ranks = [rank_cache.rank(specs[i].consumer, topic, group) for i in batch]
        shares, look_again = _claim_together(topic, group, [specs[i] for i in batch], ranks, now)
        due: list[datetime | None] = []  # read once, for the first pull left without a share
        full = 0
        for i, share in zip(batch, shares, strict=True):
            if share:
                full += len(share) >= specs[i].max_messages
                answers[i] = PullAttempt(share, None)
            elif remaining[i] <= 0:
                answers[i] = PullAttempt([], None)
            else:
                if not due:
                    due.append(now if look_again else sql.next_due(topic, group, now))
                answers[i] = PullAttempt([], wait_timeout(remaining[i], due[0]))
        delivered = sum(len(share) for share in shares)
        if delivered:
            live_moved([(topic, group, Status.NEW, Status.RUNNING)] * delivered)
            metrics.delivered.labels(topic, group).inc(delivered)
        if full:
            wakeup_hub().notify_local([(topic, group)], limit=WAKE_MORE_TOGETHER * full)
    return answers


@retry_on_lock_conflict
def _claim_together(
    topic: str, group: str, specs: list[PullSpec], ranks: list[tuple[int | None, int | None]], now: datetime,
) -> tuple[list[list[Message]], bool]:
    """The rows for these pulls, in claim order, each pull's share leased to it; and whether
    the pulls left without a share should look again at once (expired rows were still
    ahead, or the claim took as many as it may at once)."""
    wanted = min(sum(s.max_messages for s in specs), settings.MQ_MAX_PULL * 10)
    with sql.short_transaction():
        rows, more = expiry.claimed_live(
            lambda: queue_claimable_rows(topic, group, now, wanted), now=now
        )
        shares: list[list[Message]] = []
        taken = 0
        for spec in specs:
            shares.append(rows[taken : taken + spec.max_messages])
            taken += len(shares[-1])
        assignments = [(share, spec.consumer, rank) for share, spec, rank in zip(shares, specs, ranks, strict=True)
                       if share]
        leased = iter(lifecycle.lease_many(assignments, now=now))
        shares = [next(leased) if share else [] for share in shares]
    return shares, more or taken >= wanted
