"""The chart series served as JSON, from the stats buckets, against the real database."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone

from messages.stats.flush import minute_of
from messages.stats.models import StatsBucket
from topics.models import Topic


def bucket(topic: str, group: str, minutes_ago: int, **counts: Any) -> None:
    StatsBucket.objects.create(topic=topic, group_name=group, minute=minute_of(timezone.now()) - timedelta(minutes=minutes_ago),
                               **counts)


def test_it_serves_each_range_with_matching_buckets(orders: Topic, clients: dict[str, Any]) -> None:
    bucket("orders", "billing", 2, produced=10, succeeded=6, failed=1, retried=2, deliverable=4, delayed=1,
           oldest_deliverable_age_seconds=30.0)
    for name, points, seconds in (("1h", 60, 60), ("24h", 96, 900), ("7d", 84, 7200)):
        data = clients["viewer"].get("/charts/series.json", {"range": name}).json()
        assert data["bucket_seconds"] == seconds
        assert len(data["t"]) == points and all(b - a == seconds for a, b in zip(data["t"], data["t"][1:], strict=False))
        assert sum(data["produced"]) == 10 and sum(data["acked"]) == 6 and sum(data["failed"]) == 1
        assert sum(data["retried"]) == 2 and sum(data["delivered"]) == 9 and sum(data["expired"]) == 0
        assert max(v for v in data["backlog"] if v is not None) == 5
        assert max(v for v in data["oldest_age_seconds"] if v is not None) == 30.0


def test_it_narrows_to_a_topic_and_a_group(orders: Topic, clients: dict[str, Any]) -> None:
    bucket("orders", "billing", 1, produced=3)
    bucket("orders", "mail", 1, produced=5)
    get = clients["viewer"].get
    assert sum(get("/charts/series.json", {"topic": "orders"}).json()["produced"]) == 8
    assert sum(get("/charts/series.json", {"topic": "orders", "group": "mail"}).json()["produced"]) == 5


def test_it_hides_another_business_lines_topic(orders: Topic, foreign_topic: Topic, clients: dict[str, Any]) -> None:
    bucket(foreign_topic.name, "default", 1, produced=7)
    hidden = clients["viewer"].get("/charts/series.json", {"topic": foreign_topic.name})
    assert hidden.status_code == 200 and sum(hidden.json()["produced"]) == 0  # as a missing topic's
    assert sum(clients["viewer"].get("/charts/series.json").json()["produced"]) == 0


def test_it_refuses_an_unknown_range(orders: Topic, clients: dict[str, Any]) -> None:
    response = clients["viewer"].get("/charts/series.json", {"range": "1y"})
    assert response.status_code == 400 and response.json()["error"]["details"]["field"] == "range"


def test_it_shows_a_group_page_with_its_chart(orders: Topic, clients: dict[str, Any]) -> None:
    page = clients["viewer"].get("/topics/orders/groups/billing/").content.decode()
    assert "data-chart-src" in page and "group=billing" in page
    assert clients["viewer"].get("/topics/orders/groups/nope/").status_code == 404
