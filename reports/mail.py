"""The heap report by e-mail: an HTML mail with the key table and an inline chart (PNG).

Each topic's alarm addresses get the rows of their topic only (a business line's operators
do not see other lines' topics); the MQ_REPORT_EMAILS list gets the whole report.
"""

from __future__ import annotations

from email.mime.image import MIMEImage
from typing import Any

from django.conf import settings
from django.core.mail import EmailMultiAlternatives
from django.template.loader import render_to_string

from reports.charts import heap_chart_png
from reports.formatting import heap_verdicts
from reports.models import ReportRun
from topics.models import Topic

CHART_CID = "heap-chart"


def report_email_send(*, run: ReportRun) -> list[str]:
    """Send a done heap report: one mail for MQ_REPORT_EMAILS (every topic), one per topic
    with alarm addresses (its own rows). Returns every address mailed."""
    result = run.result or {}
    topics_in_report = {row["topic"] for row in result.get("groups", [])}
    sent: list[str] = []
    everyone = list(getattr(settings, "MQ_REPORT_EMAILS", []) or [])
    if everyone:
        _send(run, result, recipients=everyone, topic=None)
        sent.extend(everyone)
    for topic in Topic.objects.filter(name__in=topics_in_report).order_by("name"):
        recipients = [address for address in (topic.alarm_emails or []) if address]
        if recipients:
            _send(run, _only_topic(result, topic.name), recipients=recipients, topic=topic.name)
            sent.extend(recipients)
    return sent


def _only_topic(result: dict[str, Any], topic: str) -> dict[str, Any]:
    return {
        **result,
        "groups": [row for row in result.get("groups", []) if row["topic"] == topic],
        "hourly": [row for row in result.get("hourly", []) if row["topic"] == topic],
        "alarms": [row for row in result.get("alarms", []) if row["topic"] == topic],
        "thresholds": {t: n for t, n in (result.get("thresholds") or {}).items() if t == topic},
    }


def _send(run: ReportRun, result: dict[str, Any], *, recipients: list[str], topic: str | None) -> None:
    scope = f"topic {topic}" if topic else "all topics"
    context = {"run": run, "result": result, "scope": scope, "chart_cid": CHART_CID,
               "groups": sorted(result.get("groups", []), key=lambda r: (-r["backlog"], r["topic"], r["group"])),
               "verdicts": heap_verdicts(result),
               # Links in a mail need the console's address (MQ_ADVERTISED_URL).
               "base_url": (getattr(settings, "MQ_ADVERTISED_URL", "") or "").rstrip("/")}
    subject = f"[MQ Center] Heap report, {scope}: {len(result.get('alarms', []))} over threshold"
    mail = EmailMultiAlternatives(
        subject=subject,
        body=render_to_string("reports/heap_email.txt", context),
        to=recipients,
    )
    mail.attach_alternative(render_to_string("reports/heap_email.html", context), "text/html")
    # "related": the HTML refers to the chart by Content-ID, so mail clients show it inline.
    mail.mixed_subtype = "related"
    image = MIMEImage(heap_chart_png(result), "png")
    image.add_header("Content-ID", f"<{CHART_CID}>")
    image.add_header("Content-Disposition", "inline", filename="heap.png")
    mail.attach(image)
    mail.send()
