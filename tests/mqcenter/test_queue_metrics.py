"""Per (topic, group) queue series on /metrics, from the stats buckets and the registry."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from messages.stats.flush import minute_of
from messages.stats.models import StatsBucket
from registry.models import ConsumerInstance


def samples(body: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_it_exports_backlog_gauges_counters_and_consumers_per_topic_and_group(admin_api, db):
    now = minute_of(timezone.now())
    StatsBucket.objects.create(topic="orders", group_name="billing", minute=now - timedelta(minutes=30),
                               produced=7, succeeded=5, failed=1, retried=1, expired=2, deliverable=99, dead=0)
    StatsBucket.objects.create(topic="orders", group_name="billing", minute=now, produced=3, succeeded=2,
                               deliverable=12, delayed=4, running=2, dead=1, oldest_deliverable_age_seconds=45.5)
    StatsBucket.objects.create(topic="mail", group_name="default", minute=now - timedelta(minutes=30), produced=1,
                               deliverable=1000)
    ConsumerInstance.objects.create(consumer="host-a:1:c", topic="orders", group_name="billing",
                                    started_at=timezone.now(), last_heartbeat=timezone.now())
    got = samples(admin_api.get("/metrics").content)
    key = (("group", "billing"), ("topic", "orders"))
    assert got[("mq_queue_backlog", key)] == 12  # the latest snapshot, not the old one
    assert got[("mq_queue_delayed", key)] == 4
    assert got[("mq_queue_in_flight", key)] == 2
    assert got[("mq_queue_dead", key)] == 1
    assert got[("mq_queue_oldest_deliverable_age_seconds", key)] == 45.5
    assert got[("mq_queue_consumers_online", key)] == 1
    assert got[("mq_queue_produced_total", key)] == 10
    assert got[("mq_queue_acked_total", key)] == 7
    assert got[("mq_queue_failed_total", key)] == 1
    assert got[("mq_queue_expired_total", key)] == 2  # EXPIRED dead letters, apart from FAIL/TIMEOUT
    assert got[("mq_queue_delivered_total", key)] == 9
    stale = (("group", "default"), ("topic", "mail"))
    assert ("mq_queue_backlog", stale) not in got  # no recent snapshot: no gauge
    assert got[("mq_queue_produced_total", stale)] == 1


def test_it_ships_a_dashboard_and_alert_rules_that_use_only_exported_series():
    import json
    import re
    from pathlib import Path

    import yaml

    from mqcenter.queue_metrics import COUNTERS, GAUGES

    exported = {g[0] for g in GAUGES} | {f"{c[0]}_total" for c in COUNTERS} | {"mq_queue_consumers_online"}
    folder = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
    dashboard = json.loads((folder / "grafana-dashboard.json").read_text())
    rules = yaml.safe_load((folder / "alerts.yml").read_text())["groups"][0]["rules"]
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]] + [r["expr"] for r in rules]
    used = {name for e in exprs for name in re.findall(r"\bmq_queue_[a-z_]+", e)}
    assert used and used <= exported, used - exported
    assert {r["alert"] for r in rules} >= {"MQBacklogOverThreshold", "MQOldestMessageTooOld", "MQDeadLettersRising",
                                           "MQNoConsumer"}
