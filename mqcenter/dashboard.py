"""Reads for the console dashboard: totals, top backlogs, dead letters, who is online and
per-minute charts. Shared by the dashboard view and its live WebSocket."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from mqcenter.core.auth import Principal
from registry import services as registry_services
from topics.selectors import groups_unattended

WINDOWS = {"hour": (timedelta(hours=1), 60), "day": (timedelta(days=1), 60 * 24), "week": (timedelta(days=7), 60 * 24 * 7)}


SNAPSHOT_MAX_AGE = timedelta(minutes=2)


def visible_topic_names(principal: Principal) -> set[str] | None:
    """The topics the principal may see (None: all)."""
    from topics.models import Topic

    if principal.biz_ids is None:
        return None
    return set(Topic.objects.filter(biz_id__in=principal.biz_ids).values_list("name", flat=True))


def backlog_overview(*, principal: Principal, topic: str | None = None) -> tuple[list[dict[str, Any]], Any]:
    """Per (topic, group): waiting (NEW), in flight, dead and the oldest waiting age.

    The counts are the live counters (messages/stats/live.py: fresh within a second,
    set from the database by the flush job); the oldest age comes from the flush job's
    latest backlog snapshot when one is at most SNAPSHOT_MAX_AGE old. The hot table is
    never counted here. Returns the rows and None (the counts are live).
    """
    from messages.stats.flush import backlog_live
    from messages.stats.models import StatsBucket

    visible = visible_topic_names(principal)
    counts, _as_of = backlog_live()
    oldest: dict[tuple[str, str], Any] = {}
    snapshots = StatsBucket.objects.filter(minute__gte=timezone.now() - SNAPSHOT_MAX_AGE, deliverable__isnull=False)
    if topic:
        snapshots = snapshots.filter(topic=topic)
    for row in snapshots.order_by("minute").values("topic", "group_name", "oldest_deliverable_age_seconds")[:50000]:
        oldest[(row["topic"], row["group_name"])] = row["oldest_deliverable_age_seconds"]
    rows = []
    for (t, g), values in sorted(counts.items()):
        if (topic and t != topic) or (visible is not None and t not in visible):
            continue
        if not any(values.values()) and (t, g) not in oldest:
            continue  # an emptied group the counters still list
        rows.append({"topic": t, "group": g, "new": values["new"], "running": values["running"],
                     "dead": values["dead"], "success": None, "oldest": oldest.get((t, g)) if values["new"] else None})
    return rows, None


def flow_totals(*, principal: Principal, since: datetime, until: datetime,
                topic: str | None = None) -> dict[tuple[str, str], dict[str, int]]:
    """Produced and acked per (topic, group) over [since, until): the flush job's buckets,
    and for the last minutes the live counters where they have more (the buckets lag the
    flush job by up to its interval)."""
    from messages.stats.flush import bucket_totals
    from messages.stats.live import live_flow
    from messages.stats.models import StatsBucket

    visible = visible_topic_names(principal)
    topics = [topic] if topic else (sorted(visible) if visible is not None else None)
    totals: dict[tuple[str, str], dict[str, int]] = {
        pair: {"produced": c["produced"], "acked": c["succeeded"]}
        for pair, c in bucket_totals(topics=topics, since=since, until=until, fields=("produced", "succeeded")).items()
    }
    recent = {key: n for key, n in live_flow(since=since).items() if key[2] < until
              and (topics is None or key[0] in topics)}
    if recent:
        buckets = StatsBucket.objects.filter(minute__gte=min(k[2] for k in recent), minute__lt=until)
        if topics is not None:
            buckets = buckets.filter(topic__in=topics)
        counted = {(b["topic"], b["group_name"], b["minute"]): b
                   for b in buckets.values("topic", "group_name", "minute", "produced", "succeeded")}
        for (t, g, minute), live in recent.items():
            bucket = counted.get((t, g, minute), {})
            entry = totals.setdefault((t, g), {"produced": 0, "acked": 0})
            entry["produced"] += max(0, live["produced"] - bucket.get("produced", 0))
            entry["acked"] += max(0, live["acked"] - bucket.get("succeeded", 0))
    return totals


def rates_by_group(*, principal: Principal, minutes: int = 5) -> dict[tuple[str, str], dict[str, float]]:
    """Produced and consumed (succeeded + failed) per minute over the last `minutes`, per
    (topic, group), from the stats buckets (one GROUP BY over a few hundred rows)."""
    from django.db.models import Sum

    from messages.stats.models import StatsBucket
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
        "chart_range": {"hour": "1h", "day": "24h", "week": "7d"}[window],
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
    totals = flow_totals(principal=principal, since=since, until=until)
    return {
        "total_produced": sum(t["produced"] for t in totals.values()),
        "total_consumed": sum(t["acked"] for t in totals.values()),
        "since": since, "until": until,
    }


def live_group_rows(*, principal: Principal, topic: str, group: str | None = None) -> dict[str, Any]:
    """A topic's (or one group's) live counts per group, with produced and acked over the
    last hour: the topic and group pages' live part."""
    until = timezone.now().replace(second=0, microsecond=0) + timedelta(minutes=1)
    rows, _ = backlog_overview(principal=principal, topic=topic)
    flows = flow_totals(principal=principal, since=until - timedelta(hours=1), until=until, topic=topic)
    by_group = {r["group"]: r for r in rows}
    from topics.models import TopicGroup

    declared = TopicGroup.objects.filter(topic__name=topic).values_list("name", flat=True)
    names = sorted(set(by_group) | {g for _, g in flows} | set(declared))
    if group is not None:
        names = [group]
    empty = {"new": 0, "running": 0, "dead": 0, "oldest": None}
    out = [{"group": name, **{k: by_group.get(name, empty)[k] for k in empty},
            **flows.get((topic, name), {"produced": 0, "acked": 0})} for name in names]
    return {"live_topic": topic, "live_group": group, "live_rows": out, "live_now": timezone.now()}
