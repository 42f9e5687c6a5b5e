"""Reads for the console dashboard: totals, top backlogs, dead letters, who is online and
per-minute charts. Shared by the dashboard view and its live WebSocket."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from messages import selectors as message_selectors
from mqcenter.core.auth import Principal
from registry import services as registry_services
from topics.selectors import groups_unattended

WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 60 * 24), "week": (timedelta(days=7), 60 * 24 * 7)}


SNAPSHOT_MAX_AGE = timedelta(minutes=2)


def backlog_overview(*, principal: Principal, topic: str | None = None) -> tuple[list[dict[str, Any]], Any]:
    """Per (topic, group): waiting (NEW), in flight, dead and the oldest waiting age.

    Read from the flush job's latest backlog snapshot when one is at most
    SNAPSHOT_MAX_AGE old (a few hundred rows, whatever the size of the hot table); without
    one (no beat running, a fresh install) counted live by `topic_stats`. Returns the rows
    and the snapshot's minute, or None when the counts are live.
    """
    from messages.models import StatsBucket
    from topics.models import Topic

    now = timezone.now()
    rows = StatsBucket.objects.filter(minute__gte=now - SNAPSHOT_MAX_AGE, deliverable__isnull=False)
    if topic:
        rows = rows.filter(topic=topic)
    if principal.biz_ids is not None:
        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows.order_by("minute").values(
        "topic", "group_name", "minute", "deliverable", "delayed", "running", "dead", "oldest_deliverable_age_seconds",
    )[:50000]:
        latest[(row["topic"], row["group_name"])] = row
    if latest:
        as_of = max(row["minute"] for row in latest.values())
        return [
            {"topic": t, "group": g, "new": (r["deliverable"] or 0) + (r["delayed"] or 0), "running": r["running"] or 0,
             "dead": r["dead"] or 0, "success": None, "oldest": r["oldest_deliverable_age_seconds"]}
            for (t, g), r in sorted(latest.items())
        ], as_of
    return [
        {"topic": e["topic"], "group": e["group"], "new": e["counts"]["NEW"], "running": e["counts"]["RUNNING"],
         "dead": e["counts"]["FAIL"] + e["counts"]["TIMEOUT"], "success": e["counts"]["SUCCESS"],
         "oldest": e["oldest_deliverable_age_seconds"]}
        for e in message_selectors.topic_stats(principal=principal, topic=topic)
    ], None


def rates_by_group(*, principal: Principal, minutes: int = 5) -> dict[tuple[str, str], dict[str, float]]:
    """Produced and consumed (succeeded + failed) per minute over the last `minutes`, per
    (topic, group), from the stats buckets (one GROUP BY over a few hundred rows)."""
    from django.db.models import Sum

    from messages.models import StatsBucket
    from topics.models import Topic

    rows = StatsBucket.objects.filter(minute__gte=timezone.now() - timedelta(minutes=minutes))
    if principal.biz_ids is not None:
        rows = rows.filter(topic__in=Topic.objects.filter(biz_id__in=principal.biz_ids).values("name"))
    summed = rows.values("topic", "group_name").annotate(p=Sum("produced"), s=Sum("succeeded"), f=Sum("failed")).order_by()
    return {(r["topic"], r["group_name"]): {"produced": (r["p"] or 0) / minutes,
                                            "consumed": ((r["s"] or 0) + (r["f"] or 0)) / minutes}
            for r in summed}


def dashboard_summary(*, principal: Principal, window: str = "hour") -> dict[str, Any]:
    stats, as_of = backlog_overview(principal=principal)
    totals = {
        "new": sum(e["new"] for e in stats), "running": sum(e["running"] for e in stats),
        "dead": sum(e["dead"] for e in stats),
    }
    backlogs = sorted((e for e in stats if e["new"]), key=lambda e: -e["new"])[:10]
    dead = sorted((e for e in stats if e["dead"]), key=lambda e: -e["dead"])[:10]
    consumers = registry_services.consumers_online(principal=principal)
    window = window if window in WINDOWS else "hour"
    unattended = groups_unattended(principal=principal)
    return {
        "totals": totals, "as_of": as_of, "backlogs": backlogs, "dead": dead,
        "consumers_online": len({c["consumer"] for c in consumers}), "subscriptions": len(consumers),
        "brokers": registry_services.brokers_online(), "window": window,
        "unattended": [(g.topic.name, g.name) for g in unattended],
        "chart": dashboard_chart(principal=principal, window=window),
        "now": timezone.now(),
    }


def dashboard_chart(*, principal: Principal, window: str) -> dict[str, Any]:
    """Produced and acked totals over the window, for the dashboard's cards (the charts
    themselves are drawn from mqcenter/charts.py). A rejected (failed) message is not
    counted as consumed."""
    span, _minutes = WINDOWS.get(window, WINDOWS["hour"])
    # Up to the end of the current minute, so the totals include what just happened.
    until = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
    since = until - span
    rows = message_selectors.stats_series(principal=principal, since=since, until=until)
    return {
        "total_produced": sum(row["produced"] for row in rows),
        "total_consumed": sum(row["succeeded"] for row in rows),
        "since": since, "until": until,
    }
