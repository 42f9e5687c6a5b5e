"""The hand-off: a message produced while a pull of its group waits in this broker process
is stored already leased to that pull, and the pull answers it after the produce's commit.
One transaction per delivery instead of two (the produce's and the woken pull's claim),
which is most of an idle delivery's time (`bench/results/ab_issue40.md`).

The stored row is what a claim would have made of it (RUNNING, attempt 1, the lease, the
pull's time and rank), so acks, lease recovery and the trace read it as any pulled row;
a pull that never answers (its client gone, its broker killed) leaves a lease that runs
out as after any answer lost on the way.

Only where a claim would have taken the message at once and alone: a due, unexpired NEW
message of a queue-mode group without flow control or fair keys, neither paused, for a pull
whose token may consume the topic. Serial, sharded, gated and fair groups order or limit
their deliveries under the group's lock: they keep the claim. Pulls waiting in other
processes are woken as before (`registry.wakeups`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from django.utils import timezone

from messages.delivery.claims.queue import plain_queue
from messages.delivery.lifecycle import lease_expiry
from messages.delivery.sql_insert import NewMessage
from messages.models import Message, Status
from messages.stats.live import live_moved
from mqcenter.core import metrics
from mqcenter.handoffs import Offer, offers
from registry.services import rank_cache
from registry.wakeups import wakeup_hub
from topics.cache import topic_cache

logger = logging.getLogger(__name__)

# A produced row with the lease columns a claim sets (NULL where nothing was handed), built
# from NewMessage's fields so that the two cannot drift apart.
_LEASE_FIELDS = ("lease_owner", "lease_expires_at", "pulled_at", "pulled_rank", "pulled_total")


def _row_type(name: str, fields: tuple[str, ...]) -> Any:
    return collections.namedtuple(name, fields)  # type: ignore[misc]


LeasedMessage = _row_type("LeasedMessage", (*NewMessage._fields, *_LEASE_FIELDS))
# A handed row as its pull's answer renders it (`answers.pull_answer` reads a Message's
# attributes, which these share): a tuple, not a model instance per message.
HandedMessage = _row_type("HandedMessage", ("id", *LeasedMessage._fields))
_NO_LEASE = (None, None, None, None, None)
_NOT_HANDED = object()


class HandOff:
    """The offers a produce took, and which of its rows each gets."""

    def __init__(self) -> None:
        self.taken: list[tuple[Offer, list[int]]] = []  # (offer, indexes of the rows it gets)
        self.rows: list[Any] = []  # as inserted
        self.ids: list[int] = []  # as stored, once inserted
        self.now: datetime | None = None  # the lease's time, `pulled_at` of the handed rows
        self._handed: set[int] = set()

    def __bool__(self) -> bool:
        return bool(self.taken)

    def lease(self, rows: list[NewMessage], now: datetime) -> list[Any]:
        """Take the open offers these rows may go to; answers the rows to insert (all
        `LeasedMessage` if any is handed, else `rows` as they are)."""
        if not offers:
            return rows
        due: dict[tuple[str, str], list[int]] = {}
        for index, row in enumerate(rows):
            if _deliverable(row, now):
                due.setdefault((row.topic, row.group_name), []).append(index)
        for (topic, group), indexes in due.items():
            biz_id = _queue_group_biz(topic, group)
            if biz_id is _NOT_HANDED:
                continue
            # In the order a claim would take them: priority first, then due time, then id.
            indexes.sort(key=lambda i: (-rows[i].priority, rows[i].effect_time, i))
            for offer, share in offers.take((topic, group), _capacity(topic, biz_id), len(indexes)):
                self.taken.append((offer, indexes[:share]))
                self._handed.update(indexes[:share])
                del indexes[:share]
        if not self.taken:
            return rows
        self.now = now
        leased: list[Any] = [LeasedMessage(*row, *_NO_LEASE) for row in rows]
        for offer, indexes in self.taken:
            spec = offer.spec
            rank = rank_cache.rank(spec.consumer, spec.topic, spec.group)
            for index in indexes:
                row = rows[index]
                # Its effect time in UTC, as a claim reads it back (a producer may give an offset).
                handed = row._replace(status=Status.RUNNING, attempt=1, effect_time=row.effect_time.astimezone(UTC))
                leased[index] = LeasedMessage(*handed, spec.consumer,
                                              lease_expiry(row.timeout_seconds, now), now, *rank)
        self.rows = leased
        return leased

    def handed(self, index: int) -> bool:
        return index in self._handed

    def fulfil(self) -> None:
        """After the commit: each pull gets its rows. The rows of a pull that did not get
        them (it gave up waiting, or the hand-over failed) are put back, NEW and woken, as
        if never handed. Never raises: the produce is committed."""
        lost: list[tuple[Offer, list[int]]] = []
        delivered: Counter[tuple[str, str]] = Counter()
        for offer, indexes in self.taken:
            try:
                handed = offer.fulfil([HandedMessage(self.ids[i], *self.rows[i]) for i in indexes])
            except Exception:
                logger.exception("handing %d messages over failed; they are put back", len(indexes))
                _decline(offer)
                handed = False
            if not handed:
                lost.append((offer, indexes))
                continue
            delivered[(offer.spec.topic, offer.spec.group)] += len(indexes)
        self.taken = []
        for (topic, group), count in delivered.items():
            with contextlib.suppress(Exception):  # counting never undoes a hand-over
                live_moved([(topic, group, Status.NEW, Status.RUNNING)] * count)
                metrics.delivered.labels(topic, group).inc(count)
        if lost:
            self._put_back(lost)

    def decline(self) -> None:
        """Nothing committed (or the produce failed): the pulls claim as usual."""
        for offer, _ in self.taken:
            _decline(offer)
        self.taken = []

    def _put_back(self, lost: list[tuple[Offer, list[int]]]) -> None:
        """Rows leased to pulls that never got them, back to NEW (guarded: only while still
        as this produce leased them), then woken."""
        woken: Counter[tuple[str, str]] = Counter()
        try:
            for offer, indexes in lost:
                spec = offer.spec
                back = Message.objects.filter(
                    id__in=[self.ids[i] for i in indexes], status=Status.RUNNING, lease_owner=spec.consumer,
                    attempt=1, pulled_at=self.now,
                ).update(status=Status.NEW, attempt=0, lease_owner=None, lease_expires_at=None, pulled_at=None,
                         pulled_rank=None, pulled_total=None, update_time=timezone.now())
                woken[(spec.topic, spec.group)] += back
            wakeup_hub().publish(+woken)
        except Exception:
            logger.exception("putting back %d handed messages failed; their leases run out instead",
                             sum(len(indexes) for _, indexes in lost))


def _decline(offer: Offer) -> None:
    with contextlib.suppress(Exception):  # its event loop closed: the process is stopping
        offer.decline()


def _capacity(topic: str, biz_id: Any) -> Callable[[Any], int]:
    """How many of the topic's rows a parked pull takes: what it asked for, if its token
    may consume the topic (another business line's pull gets none)."""

    def capacity(spec: Any) -> int:
        may = spec.principal.may("consume", topic) and spec.principal.may_biz(biz_id)
        return int(spec.max_messages) if may else 0

    return capacity


def _deliverable(row: NewMessage, now: datetime) -> bool:
    return (row.status == Status.NEW and row.effect_time <= now
            and (row.expires_at is None or row.expires_at > now))


def _queue_group_biz(topic: str, group: str) -> Any:
    """The topic's business line when a claim of the group would take a message at once
    and alone (`claims.queue.plain_queue`), else `_NOT_HANDED`. Read before taking an offer:
    `take` holds a lock the event loop also takes, so nothing under it may wait on the
    database."""
    topic_row = topic_cache.get(topic)
    topic_group = topic_row.group_rows.get(group) if topic_row is not None else None  # type: ignore[attr-defined]
    return topic_row.biz_id if plain_queue(topic_row, topic_group) else _NOT_HANDED  # type: ignore[union-attr]
