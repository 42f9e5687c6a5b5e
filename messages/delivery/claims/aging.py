"""Priority aging for queue claims (MQ_PRIORITY_AGING_SECONDS > 0; off by default).

A waiting message's effective priority rises by one level for every MQ_PRIORITY_AGING_SECONDS
it has been due, up to MAX_PRIORITY: min(9, priority + floor((now - effect_time) / aging)).
A claim takes the highest effective priorities first, then (effect_time, id) as always, so a
priority-0 message waits at most about 9 x MQ_PRIORITY_AGING_SECONDS behind any stream of
priority-9 ones, and then goes first among the 9s (it is older).

Within one priority level the oldest rows have the highest effective priority, so the claim
reads the `limit` oldest due rows of each level along `ix_msg_priority` (ten short index
ranges, one statement), merges them by effective priority, and locks the chosen ids SKIP
LOCKED (a row another claimer took meanwhile is skipped: the claim returns fewer). Groups
pay for it only when the setting is on; the plain claim (`sql.claimable_rows`) is unchanged.
"""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from messages.delivery import sql
from messages.models import MAX_PRIORITY, Message, Status


def queue_claimable_rows(topic: str, group: str, now: datetime, limit: int) -> list[Message]:
    """A queue claim's rows, locked: by priority, or by aged priority when aging is on."""
    aging = settings.MQ_PRIORITY_AGING_SECONDS
    if aging > 0:
        return aged_claimable_rows(topic, group, now, limit, aging_seconds=aging)
    return sql.claimable_rows(topic, group, now, limit, lock=True)


def effective_priority(priority: int, effect_time: datetime, now: datetime, aging_seconds: float) -> int:
    waited = max(0.0, (now - effect_time).total_seconds())
    return min(MAX_PRIORITY, priority + int(waited // aging_seconds))


def aged_claimable_rows(topic: str, group: str, now: datetime, limit: int, *, aging_seconds: float) -> list[Message]:
    """Up to `limit` deliverable NEW rows of the group in aged-priority order, locked FOR
    UPDATE SKIP LOCKED."""
    due = Message.objects.filter(topic=topic, group_name=group, status=Status.NEW, effect_time__lte=now)
    levels = [due.filter(priority=level).order_by("effect_time", "id").values_list("id", "priority", "effect_time")[:limit]
              for level in range(MAX_PRIORITY + 1)]
    candidates = list(levels[0].union(*levels[1:], all=True))
    candidates.sort(key=lambda c: (-effective_priority(c[1], c[2], now, aging_seconds), c[2], c[0]))
    order = {row_id: index for index, (row_id, _, _) in enumerate(candidates[:limit])}
    if not order:
        return []
    ids = list(order)
    if sql.is_mysql():  # in `sql.short_transaction`'s SQL transaction, which the ORM does not see
        rows = sql._messages(
            f"SELECT {sql.MESSAGE_COLUMNS} FROM mq_message WHERE id IN ({', '.join(['%s'] * len(ids))}) "  # noqa: S608 - names from the model
            "AND status = %s FOR UPDATE SKIP LOCKED", [*ids, Status.NEW])
    else:
        rows = list(Message.objects.select_for_update(skip_locked=True).filter(id__in=ids, status=Status.NEW))
    rows.sort(key=lambda m: order[m.id])
    return rows
