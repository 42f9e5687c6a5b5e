"""How the reports read: charts with readable axes, human times and ages, verdicts, links.

Built from stored results (plain dicts, as a done run holds them): no Spark needed.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.template.loader import render_to_string

from reports import formatting
from reports.chart_data import heap_chart_data, trace_chart_data
from reports.charts import heap_figure, hour_labels, trace_figure
from reports.management.commands.runreport import Command
from reports.models import ReportRun


def group(topic: str, name: str, **values: Any) -> dict[str, Any]:
    row = {"topic": topic, "group": name, "messages": 10, "success": 6, "fail": 1, "timeout": 1, "new": 1,
           "running": 1, "latency_p50": 0.5, "latency_p90": 2.0, "latency_p99": 3.0,
           "backlog": 0, "delayed": 0, "inflow": 0, "outflow": 0, "inflow_per_hour": 0.0,
           "outflow_per_hour": 0.0, "trend": "steady", "drain_hours": 0.0, "oldest_age_seconds": None}
    row.update(values)
    return row


def hours(topic: str, name: str, stamps: list[str], inflow: list[int], outflow: list[int]) -> dict[str, Any]:
    return {"topic": topic, "group": name, "hours": [
        {"hour": h, "inflow": i, "outflow": o} for h, i, o in zip(stamps, inflow, outflow, strict=True)]}


ACROSS_MIDNIGHT = ["2026-01-09T22:00:00", "2026-01-09T23:00:00", "2026-01-10T00:00:00", "2026-01-10T01:00:00"]
HEAP = {
    "kind": "heap", "since": "2026-01-09T22:00:00", "until": "2026-01-10T01:30:00.123456",
    "as_of": "2026-01-10T01:30:00.123456",
    "groups": [
        group("orders", "default", backlog=30, delayed=2, running=1, inflow=40, outflow=11,
              inflow_per_hour=10.0, outflow_per_hour=2.75, trend="growing", drain_hours=None,
              oldest_age_seconds=11520.4),
        group("orders", "billing", backlog=0, running=0, inflow=5, outflow=5, inflow_per_hour=5.0,
              outflow_per_hour=5.0, oldest_age_seconds=None),
        group("mail", "default", backlog=12, running=0, inflow=2, outflow=14, inflow_per_hour=1.0,
              outflow_per_hour=7.0, trend="shrinking", drain_hours=2.0, oldest_age_seconds=95.0),
    ],
    "hourly": [hours("orders", "default", ACROSS_MIDNIGHT, [10, 10, 10, 10], [1, 2, 4, 4]),
               hours("orders", "billing", ACROSS_MIDNIGHT, [5, 0, 0, 0], [5, 0, 0, 0]),
               hours("mail", "default", ACROSS_MIDNIGHT, [0, 0, 2, 0], [0, 0, 7, 7])],
    "alarms": [{"topic": "orders", "group": "default", "backlog": 30, "threshold": 5, "ratio": 6.0,
                "oldest_age_seconds": 11520.4, "trend": "growing"}],
    "thresholds": {"orders": 5},
}
TRACE = {"kind": "trace", "since": "2026-01-10T06:00:00", "until": "2026-01-10T12:00:00", "messages": 30,
         "groups": [group("orders", "default", latency_p50=0.2, latency_p90=1.0, latency_p99=289.0),
                    group("mail", "default"), group("2024", "x", success=0, latency_p50=None,
                                                     latency_p90=None, latency_p99=None)],
         "reasons": [{"topic": "orders", "group": "default", "rank": 1, "reason": "db timeout", "failures": 3}]}


def test_the_latency_chart_is_on_a_log_scale_with_each_groups_bars_centred_on_its_label() -> None:
    latency = trace_figure(TRACE).axes[1]
    assert latency.get_xscale() == "log" and "log scale" in latency.get_xlabel()
    labels = [t.get_text() for t in latency.get_yticklabels()]
    assert labels == ["orders/default", "mail/default"]  # a group without latency is left out
    centres: dict[int, list[float]] = {}
    for bar in latency.patches:
        centre = bar.get_y() + bar.get_height() / 2
        centres.setdefault(round(centre), []).append(centre)
    for tick, values in centres.items():
        assert sum(values) / len(values) == pytest.approx(tick)
    assert all(axes.get_xlabel() for axes in trace_figure(TRACE).axes)


def test_the_outcomes_chart_shows_cancelled_and_expired_messages_only_when_there_are_some() -> None:
    plain = trace_figure(TRACE).axes[0].get_legend_handles_labels()[1]
    assert plain == ["success", "fail", "timeout", "new", "running"]
    cancels = {**TRACE, "groups": [group("orders", "default", cancelled=3, expired=1), group("mail", "default")]}
    outcomes = trace_figure(cancels).axes[0]
    assert outcomes.get_legend_handles_labels()[1] == ["success", "fail", "timeout", "expired", "cancelled",
                                                        "new", "running"]
    ends = {round(bar.get_y()): bar.get_x() + bar.get_width() for bar in outcomes.patches}
    assert ends[0] == 10 + 3 + 1  # the stacked bar holds the cancelled and expired messages too


def test_the_console_charts_series_are_per_topic_hours_in_utc_and_the_largest_backlogs() -> None:
    data = heap_chart_data(HEAP)
    assert [t["topic"] for t in data["topics"]] == ["mail", "orders"]
    orders = data["topics"][1]
    assert orders["t"][0] == 1767996000 and orders["t"][2] - orders["t"][0] == 7200  # 2026-01-09 22:00 UTC
    assert orders["inflow"] == [15, 10, 10, 10] and orders["outflow"] == [6, 2, 4, 4]
    # unfinished at each hour's end: the count at the window's end (30 + 2 + 1) less later net flow
    assert orders["unfinished"] == [13, 21, 27, 33]
    assert data["backlog"] == {"labels": ["orders/default", "mail/default"], "backlog": [30, 12],
                               "threshold": [5, None]}
    latency = trace_chart_data(TRACE)
    assert latency["labels"] == ["orders/default", "mail/default"]  # no success, no latency
    assert latency["p99"] == [289.0, 3.0]


def test_the_flow_is_drawn_per_topic_with_dated_hours_across_midnight() -> None:
    figure = heap_figure(HEAP)
    titles = [axes.get_title() for axes in figure.axes]
    flows = [a for a in figure.axes if a.get_title().endswith("unfinished at each hour's end")]
    assert [a.get_title().split(":")[0] for a in flows] == ["mail", "orders"]
    ticks = [t.get_text() for t in flows[1].get_xticklabels()]
    assert ticks == ["01-09 22:00", "23:00", "01-10 00:00", "01:00"]
    assert all(a.get_xlabel() and a.get_ylabel() for a in flows), titles
    orders = next(line for line in flows[1].get_lines() if line.get_label() == "inflow")
    assert list(orders.get_ydata()) == [15, 10, 10, 10]  # its two groups summed
    assert hour_labels(ACROSS_MIDNIGHT[2:]) == ["00:00", "01:00"]  # one day: times only


def test_the_backlog_chart_marks_alarm_thresholds_and_leaves_out_empty_groups() -> None:
    backlog = heap_figure(HEAP).axes[-1]
    assert [t.get_text() for t in backlog.get_yticklabels()] == ["orders/default", "mail/default"]
    marks = [c for c in backlog.collections if c.get_label() == "alarm threshold"]
    assert len(marks) == 1 and marks[0].get_segments()[0][0][0] == 5
    assert backlog.get_xlabel()
    one = heap_figure(HEAP, topic="mail")
    assert [a.get_title().split(":")[0] for a in one.axes if "flow per hour" in a.get_title()] == ["mail"]


def test_the_email_reads_in_human_times_and_ages() -> None:
    context = {"result": HEAP, "scope": "all topics", "chart_cid": "c", "base_url": "https://mq.example",
               "groups": HEAP["groups"], "verdicts": formatting.heap_verdicts(HEAP)}
    text = render_to_string("reports/heap_email.txt", context)
    html = render_to_string("reports/heap_email.html", context)
    import re

    shown = re.sub(r'href="[^"]*"', "", html)  # what the reader sees, not the links' exact times
    for body in (text, shown):
        assert "2026-01-09 22:00 UTC" in body and "2026-01-10 01:30:00 UTC" in body
        assert ".123456" not in body and "T01:30" not in body
        assert "3 h 12 min" in body and "1 min" in body
        assert " -s" not in body and "oldest -" not in body and "oldest —" not in body
        assert "growing, 30 waiting, does not drain at current rates, over its alarm threshold" in body
        assert "shrinking, drains in 2 h at current rates" in body
    # Delayed and running beside the backlog; no age and no "0.0 s" to drain where nothing waits.
    assert ("orders/default: backlog 30 (oldest waiting 3 h 12 min), delayed 2, running 1, in 40, out 11, "
            "growing, time to drain never at current rates") in text
    assert "orders/billing: backlog 0, delayed 0, running 0, in 5, out 5, steady, nothing waiting" in text
    assert "0.0 s" not in text and "0.0 s" not in html
    # The list as it is now, of the messages produced before the window's end, and said so.
    assert ('href="https://mq.example/messages/?topic=orders&amp;group=default&amp;status=NEW'
            '&amp;added_before=2026-01-10T01%3A30%3A00.123456%2B00%3A00">waiting now</a>') in html
    assert "as they are now, not as they were at the window's end" in html


def test_verdicts_say_what_each_topic_does() -> None:
    trace = {v["topic"]: v["verdict"] for v in formatting.trace_verdicts(TRACE)}
    assert trace["orders"] == ("10 messages, 75% of the finished succeeded, 12% failed, 12% timed out, "
                               "p99 latency 4 min, most frequent failure: db timeout")
    assert trace["2024"].startswith("10 messages, 0% of the finished succeeded")
    steady = {**HEAP, "groups": [group("x", "y")], "alarms": []}
    assert formatting.heap_verdicts(steady)[0]["verdict"] == "steady, nothing waiting"


def test_the_trace_verdict_counts_expired_and_cancelled_messages_as_finished() -> None:
    rows = [group("pay", "settle", messages=4, success=3, fail=0, timeout=0, expired=1, new=0, running=0),
            group("pay", "refund", messages=4, success=0, fail=0, timeout=0, expired=0, cancelled=4, new=0,
                  running=0, latency_p99=None)]
    [verdict] = formatting.trace_verdicts({"groups": rows})
    assert verdict["verdict"] == "8 messages, 38% of the finished succeeded, 12% expired, 50% cancelled, p99 latency 3.0 s"
    assert formatting.trace_verdicts({"groups": [group("a", "b", success=999, fail=1)]})[0]["verdict"].startswith(
        "10 messages, >99% of the finished succeeded, <1% failed, <1% timed out")


def test_a_window_shorter_than_a_minute_shows_seconds() -> None:
    assert formatting.human_window("2026-01-10T06:00:00+00:00", "2026-01-10T06:00:30+00:00") == (
        "2026-01-10 06:00:00 UTC → 2026-01-10 06:00:30 UTC")
    assert formatting.human_window("2026-01-10T06:00:00+00:00", "2026-01-10T12:00:00+00:00") == (
        "2026-01-10 06:00 UTC → 2026-01-10 12:00 UTC")
    html = render_to_string("reports/reports.html#runs", {"runs": [ReportRun(
        id=7, kind="heap", state="done", params={"since": "2026-01-10T06:00:00+00:00",
                                                 "until": "2026-01-10T06:00:30+00:00"})]})
    assert "06:00:00 UTC → 2026-01-10 06:00:30 UTC" in html


def test_the_trace_summary_on_the_command_line_shows_new_and_running() -> None:
    from datetime import UTC, datetime

    out = io.StringIO()
    command = Command(stdout=out)
    at = datetime(2026, 1, 10, tzinfo=UTC)
    command._summary(ReportRun(id=3, kind="trace", result=TRACE, started_at=at, finished_at=at))
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("topic/group"))
    statuses = ["success", "fail", "timeout", "expired", "cancelled", "new", "running", "prepared"]
    assert header.split()[1:10] == ["msgs", *statuses]
    row = next(line for line in lines if line.startswith("orders/default"))
    assert row.split()[7:9] == ["1", "1"]
    assert any(line.startswith("orders: 10 messages") for line in lines)


def test_the_command_line_trace_summary_columns_add_up_to_the_messages() -> None:
    from datetime import UTC, datetime

    rows = [group("pay", "settle", messages=12, success=3, fail=1, timeout=1, expired=2, cancelled=1, new=1,
                  running=1, prepared=2)]
    out = io.StringIO()
    at = datetime(2026, 1, 10, tzinfo=UTC)
    Command(stdout=out)._summary(ReportRun(id=4, kind="trace", result={**TRACE, "groups": rows},
                                           started_at=at, finished_at=at))
    row = next(line for line in out.getvalue().splitlines() if line.startswith("pay/settle")).split()
    assert row[1:10] == ["12", "3", "1", "1", "2", "1", "1", "1", "2"]
    assert int(row[1]) == sum(int(n) for n in row[2:10])


def test_the_command_line_heap_summary_shows_delayed_running_and_no_drain_time_for_nothing() -> None:
    from datetime import UTC, datetime

    out = io.StringIO()
    at = datetime(2026, 1, 10, tzinfo=UTC)
    Command(stdout=out)._summary(ReportRun(id=5, kind="heap", result=HEAP, started_at=at, finished_at=at))
    lines = out.getvalue().splitlines()
    header = next(line for line in lines if line.startswith("topic/group")).split()
    assert header[1:4] == ["backlog", "delayed", "running"]
    busy = next(line for line in lines if line.startswith("orders/default")).split()
    assert busy[1:4] == ["30", "2", "1"] and line_ends(busy, "never at current rates")
    empty = next(line for line in lines if line.startswith("orders/billing"))
    assert empty.endswith("steady  nothing waiting") and "0.0 s" not in empty


def line_ends(words: list[str], text: str) -> bool:
    return " ".join(words).endswith(text)


def test_it_warns_at_start_up_when_report_mails_would_carry_relative_links() -> None:
    from django.core.checks import run_checks
    from django.test import override_settings

    def warned() -> list[str]:
        return [m.id for m in run_checks() if m.id == "mq_reports.W001"]

    with override_settings(MQ_REPORT_EMAILS=["ops@example.com"], MQ_ADVERTISED_URL=""):
        assert warned() == ["mq_reports.W001"]
    with override_settings(MQ_REPORT_EMAILS=["ops@example.com"], MQ_ADVERTISED_URL="https://mq.example"):
        assert warned() == []
    with override_settings(MQ_REPORT_EMAILS=[], MQ_ADVERTISED_URL=""):
        assert warned() == []


def test_a_worker_says_so_when_it_starts_too(caplog: pytest.LogCaptureFixture) -> None:
    from django.test import override_settings

    from reports.tasks import report_worker_ready

    with override_settings(MQ_REPORT_EMAILS=["ops@example.com"], MQ_ADVERTISED_URL=""), caplog.at_level("WARNING"):
        report_worker_ready()
    assert any("MQ_ADVERTISED_URL is not set" in r.getMessage() for r in caplog.records)
    caplog.clear()
    with override_settings(MQ_REPORT_EMAILS=["ops@example.com"], MQ_ADVERTISED_URL="https://mq.example"):
        report_worker_ready()
    assert not caplog.records
