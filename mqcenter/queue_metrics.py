"""Queue-depth series for Prometheus, per (topic, group), read at scrape time.

Gauges come from the flush job's latest backlog snapshot in the stats buckets (at most
SNAPSHOT_MAX_AGE old; a group without a recent snapshot exports no gauge rather than a stale
one), consumers online from the registry's heartbeats. Counters are the sums of the stats
buckets, so they are the cluster's totals (every broker process answers the same numbers):
`rate()` over them works; they restart from the kept buckets when old buckets are pruned.
Never reads the hot message table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from django.db.models import Count, Sum
from django.utils import timezone
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

SNAPSHOT_MAX_AGE = timedelta(minutes=5)
LABELS = ["topic", "group"]
GAUGES = (
    ("mq_queue_backlog", "Deliverable messages waiting (NEW, due)", "deliverable"),
    ("mq_queue_delayed", "Scheduled messages not yet due (NEW, effect time ahead)", "delayed"),
    ("mq_queue_in_flight", "Messages leased to consumers (RUNNING)", "running"),
    ("mq_queue_dead", "Dead letters (FAIL, TIMEOUT or EXPIRED)", "dead"),
    ("mq_queue_oldest_deliverable_age_seconds", "Age of the oldest deliverable message",
     "oldest_deliverable_age_seconds"),
)
COUNTERS = (
    ("mq_queue_produced", "Messages produced", ("produced",)),
    ("mq_queue_delivered", "Deliveries that ended (acked, failed or retried)", ("succeeded", "failed", "retried")),
    ("mq_queue_acked", "Messages acked as SUCCESS", ("succeeded",)),
    ("mq_queue_failed", "Messages that failed or timed out for good (became FAIL or TIMEOUT)", ("failed",)),
    ("mq_queue_expired", "Messages that expired undelivered (became EXPIRED)", ("expired",)),
)


def queue_snapshots() -> dict[tuple[str, str], dict[str, Any]]:
    """The latest backlog snapshot of each (topic, group), if recent."""
    from messages.stats.models import StatsBucket

    rows = StatsBucket.objects.filter(minute__gte=timezone.now() - SNAPSHOT_MAX_AGE, deliverable__isnull=False)
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows.order_by("minute").values("topic", "group_name", *(g[2] for g in GAUGES)):
        latest[(row["topic"], row["group_name"])] = row
    return latest


class QueueCollector(Collector):
    def collect(self) -> Iterator[Any]:
        from messages.stats.models import StatsBucket
        from registry.models import ConsumerInstance
        from registry.services import online_cutoff

        snapshots = queue_snapshots()
        for name, doc, field in GAUGES:
            family = GaugeMetricFamily(name, doc, labels=LABELS)
            for (topic, group), row in sorted(snapshots.items()):
                if row[field] is not None:
                    family.add_metric([topic, group], float(row[field]))
            yield family
        online = GaugeMetricFamily("mq_queue_consumers_online", "Consumers with a recent heartbeat", labels=LABELS)
        counts = (ConsumerInstance.objects.filter(last_heartbeat__gte=online_cutoff())
                  .values("topic", "group_name").annotate(n=Count("consumer", distinct=True)).order_by())
        seen = {(r["topic"], r["group_name"]): r["n"] for r in counts}
        for key in sorted(set(seen) | set(snapshots)):
            online.add_metric(list(key), float(seen.get(key, 0)))
        yield online
        fields = sorted({f for _, _, parts in COUNTERS for f in parts})
        totals = StatsBucket.objects.values("topic", "group_name").annotate(**{f: Sum(f) for f in fields}).order_by()
        rows = [(r["topic"], r["group_name"], r) for r in totals]
        for name, doc, parts in COUNTERS:
            counter = CounterMetricFamily(name, doc, labels=LABELS)
            for topic, group, row in sorted(rows, key=lambda r: (r[0], r[1])):
                counter.add_metric([topic, group], float(sum(row[p] or 0 for p in parts)))
            yield counter


queue_registry = CollectorRegistry(auto_describe=False)
queue_registry.register(QueueCollector())
