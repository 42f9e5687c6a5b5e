"""The console's Reports page: runs with state and progress, "run now" by operators, each
report as tables and a chart, limited to the viewer's business lines, data escaped."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from mqcenter.models import ConsoleGrant
from reports.models import ReportRun
from topics.models import Biz, Topic

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(300)]


def login(role: str | None, biz: Biz | None = None, *, name: str = "u") -> Client:
    from django.contrib.auth.models import User

    user = User.objects.create_user(name, f"{name}@example.org", "a-long-test-password-42")
    if role:
        ConsoleGrant.objects.create(user=user, role=role, biz=biz)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def shop() -> Biz:
    biz = Biz.objects.create(name="shop")
    Topic.objects.filter(name="orders").update(biz=biz)
    return biz


def test_it_lists_runs_with_state_and_progress(trace_run: dict[str, Any], heap_run: dict[str, Any]) -> None:
    running = ReportRun.objects.create(kind="heap", state="running", progress=42, note="summary",
                                       params={"since": "2026-01-10T06:00:00+00:00", "until": "2026-01-10T12:00:00+00:00"})
    html = login("viewer").get("/reports/").content.decode()
    for run in (trace_run["run"], heap_run["run"]):
        assert f'href="/reports/{run.id}/"' in html
    assert "done" in html and 'value="42"' in html and "summary" in html
    assert 'hx-trigger="every 2s"' in html  # polls while a run is active
    assert f'id="run-{running.id}"' in html
    assert "Run now" not in html  # viewers read, operators run


def test_it_runs_a_report_now_for_operators_only(shop: Biz) -> None:
    response = login("operator", shop, name="olga").post("/reports/run/", {"kind": "trace", "since": "", "until": ""})
    run = ReportRun.objects.get(actor="user:olga")
    assert response.status_code == 303 and response["Location"] == f"/reports/{run.id}/"
    assert run.state == "queued" and run.kind == "trace" and run.actor == "user:olga"
    assert login("viewer", shop, name="vera").post("/reports/run/", {"kind": "heap"}).status_code == 403
    assert Client().post("/reports/run/", {"kind": "heap"}).status_code == 302  # to the login page
    assert ReportRun.objects.filter(state="queued").count() == 1
    bad = login("operator", shop, name="omar").post("/reports/run/", {"kind": "heap", "since": "nonsense"})
    assert bad.status_code == 400 and ReportRun.objects.filter(state="queued").count() == 1


def test_it_renders_a_done_report_as_tables_and_a_chart(trace_run: dict[str, Any], heap_run: dict[str, Any]) -> None:
    client = login("admin")
    heap = heap_run["run"]
    html = client.get(f"/reports/{heap.id}/").content.decode()
    assert 'id="heap-groups"' in html and 'id="heap-alarms"' in html
    topics = sorted({row["topic"] for row in heap.result["groups"]})
    # charts drawn in the page from the run's series (uPlot), a PNG per topic as e-mailed
    assert f'data-report-chart-src="/reports/{heap.id}/chart.json"' in html
    for topic in topics:
        assert f'href="/reports/{heap.id}/chart.png?topic={topic}"' in html
    series = client.get(f"/reports/{heap.id}/chart.json").json()
    assert [t["topic"] for t in series["topics"]] == topics
    for item in series["topics"]:  # the topic's groups summed, hour by hour
        hourly = [s["hours"] for s in heap.result["hourly"] if s["topic"] == item["topic"]]
        assert item["inflow"] == [sum(h[i]["inflow"] for h in hourly) for i in range(len(item["t"]))]
        assert len(item["t"]) == len(item["outflow"]) == len(item["unfinished"]) == 6
    assert series["backlog"]["backlog"] == sorted(series["backlog"]["backlog"], reverse=True)
    assert 5 in series["backlog"]["threshold"]  # orders' alarm threshold beside its groups
    verdicts = html[html.index('id="verdicts"'):html.index("</ul>", html.index('id="verdicts"'))]
    assert verdicts.count("<li>") == len(topics) and "does not drain at current rates" in verdicts
    for row in heap.result["groups"]:
        assert f"<td>{row['topic']}</td><td>{row['group']}</td><td class=\"num\">{row['backlog']}</td>" in html
        # each row links to the console's message list, filtered to it (as it is now, of the
        # messages produced before the window's end), and says so
        link = (f'href="/messages/?topic={row["topic"]}&amp;group={row["group"]}&amp;status=NEW'
                '&amp;added_before=2026-01-10T12%3A00%3A00%2B00%3A00">waiting now</a>')
        assert link in html
    assert 'id="links-now"' in html
    listed = client.get("/messages/?topic=orders&group=default&status=NEW")
    assert listed.status_code == 200
    chart = client.get(f"/reports/{heap.id}/chart.png?topic=orders")
    assert chart.status_code == 200 and chart["Content-Type"] == "image/png" and chart.content.startswith(b"\x89PNG")
    trace = client.get(f"/reports/{trace_run['run'].id}/").content.decode()
    assert 'id="trace-groups"' in trace and 'id="trace-consumers"' in trace and "db timeout" in trace
    assert 'id="verdicts"' in trace and 'id="consumer-definitions"' in trace
    assert 'href="/messages/?topic=orders&amp;group=default&amp;added_after=2026-01-10T06%3A00%3A00%2B00%3A00' in trace
    # A consumer's failure text is data: shown escaped, never as markup.
    assert "<script>alert(1)</script>" not in trace and "&lt;script&gt;alert(1)&lt;/script&gt;" in trace
    assert client.get(f"/reports/{trace_run['run'].id}/chart.png").content.startswith(b"\x89PNG")
    latency = client.get(f"/reports/{trace_run['run'].id}/chart.json").json()
    timed = [g for g in trace_run["run"].result["groups"] if g["latency_p50"] is not None]
    assert sorted(latency["labels"]) == sorted(f"{g['topic']}/{g['group']}" for g in timed)
    assert all(a <= b <= c for a, b, c in zip(latency["p50"], latency["p90"], latency["p99"], strict=True))


def test_it_shows_a_viewer_only_the_topics_of_their_business_line(shop: Biz, heap_run: dict[str, Any]) -> None:
    viewer = login("viewer", shop)
    html = viewer.get(f"/reports/{heap_run['run'].id}/").content.decode()
    assert "<td>orders</td>" in html
    assert "<td>mail</td>" not in html and "<td>2024</td>" not in html
    series = viewer.get(f"/reports/{heap_run['run'].id}/chart.json").json()
    assert [t["topic"] for t in series["topics"]] == ["orders"]
    assert all(label.startswith("orders/") for label in series["backlog"]["labels"])


def test_it_shows_the_error_of_a_failed_run() -> None:
    run = ReportRun.objects.create(kind="trace", state="failed", error="SQLException: Connection refused <b>",
                                   params={"since": "2026-01-10T06:00:00+00:00", "until": "2026-01-10T12:00:00+00:00"})
    client = login("operator")  # a run over every topic: its error is for global operators
    html = client.get(f"/reports/{run.id}/").content.decode()
    assert 'id="run-error"' in html and "Connection refused &lt;b&gt;" in html
    assert "Connection refused" in client.get("/reports/").content.decode()
    assert client.get(f"/reports/{run.id}/chart.png").status_code == 404
    assert client.get(f"/reports/{run.id}/chart.json").status_code == 404
    assert client.get("/reports/999999/").status_code == 404
