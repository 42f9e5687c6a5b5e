"""Console pages for the Spark reports: the list of runs with progress, "run now", and each
report as tables and a chart. Thin doors over reports/services.py."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import reverse
from django.views.decorators.http import require_POST

from mqcenter.console import htmx_redirect, moment_from_form, render_page
from mqcenter.core.roles import console_principal, console_view
from mqcenter.models import ConsoleRole
from reports.chart_data import heap_chart_data, trace_chart_data
from reports.charts import heap_chart_png, trace_chart_png
from reports.formatting import heap_verdicts, trace_verdicts
from reports.models import ReportRun
from reports.preflight import report_requirements_missing
from reports.services import (
    report_error_visible,
    report_result_visible,
    report_run_create,
    report_run_get,
)

RECENT_RUNS = 50
ACTIVE = (ReportRun.State.QUEUED, ReportRun.State.RUNNING)


@console_view(ConsoleRole.VIEWER)
def report_list(request: HttpRequest) -> HttpResponse:
    runs = list(ReportRun.objects.defer("result")[:RECENT_RUNS])
    operator = console_principal(request.user, ConsoleRole.OPERATOR)
    for run in runs:
        run.visible_error = report_error_visible(operator=operator, run=run)  # type: ignore[attr-defined]
    return render_page(request, "reports/reports.html", {
        "runs": runs,
        "active": any(run.state in ACTIVE for run in runs),
        "may_run": operator is not None,
        "missing": report_requirements_missing(),
    }, partial="runs")


@require_POST
@console_view(ConsoleRole.OPERATOR)
def report_run_now(request: HttpRequest) -> HttpResponse:
    run = report_run_create(
        kind=request.POST.get("kind", ""),
        since=moment_from_form(request.POST.get("since"), "since"),
        until=moment_from_form(request.POST.get("until"), "until"),
        topics=[t.strip() for t in request.POST.get("topic", "").split(",") if t.strip()],
        actor=request.console.principal.name,
    )
    return htmx_redirect(request, reverse("console:report", args=[run.id]))


@console_view(ConsoleRole.VIEWER)
def report_detail(request: HttpRequest, run_id: int) -> HttpResponse:
    run = report_run_get(run_id=run_id)
    result = report_result_visible(principal=request.console.principal, result=run.result)
    operator = console_principal(request.user, ConsoleRole.OPERATOR)
    return render_page(request, "reports/report.html", {
        "run": run,
        "error": report_error_visible(operator=operator, run=run),
        "result": result,
        "finished": run.state not in ACTIVE,
        "reasons_by_group": _by_group((result or {}).get("reasons", [])),
        "attempts_by_group": _by_group((result or {}).get("attempts", [])),
        "verdicts": _verdicts(run, result),
    }, partial="progress")


@console_view(ConsoleRole.VIEWER)
def report_chart(request: HttpRequest, run_id: int) -> HttpResponse:
    run = report_run_get(run_id=run_id)
    result = report_result_visible(principal=request.console.principal, result=run.result)
    if run.state != ReportRun.State.DONE or result is None:
        return HttpResponse(status=404)
    if run.kind == ReportRun.Kind.HEAP:
        png = heap_chart_png(result, topic=request.GET.get("topic") or None)
    else:
        png = trace_chart_png(result)
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=3600"  # a done run never changes
    return response


@console_view(ConsoleRole.VIEWER)
def report_chart_data(request: HttpRequest, run_id: int) -> HttpResponse:
    """The charts' series as JSON (drawn by static/console/report_charts.js)."""
    run = report_run_get(run_id=run_id)
    result = report_result_visible(principal=request.console.principal, result=run.result)
    if run.state != ReportRun.State.DONE or result is None:
        return HttpResponse(status=404)
    data = heap_chart_data(result) if run.kind == ReportRun.Kind.HEAP else trace_chart_data(result)
    response = JsonResponse(data)
    response["Cache-Control"] = "private, max-age=3600"  # a done run never changes
    return response


def _verdicts(run: ReportRun, result: dict | None) -> list[dict]:
    if run.state != ReportRun.State.DONE or not result:
        return []
    return heap_verdicts(result) if run.kind == ReportRun.Kind.HEAP else trace_verdicts(result)


def _by_group(rows: list[dict]) -> list[dict]:
    """Rows regrouped as [{topic, group, rows: [...]}, ...] in their order."""
    grouped: dict[tuple[str, str], list[dict]] = {}
    for row in rows:
        grouped.setdefault((row["topic"], row["group"]), []).append(row)
    return [{"topic": t, "group": g, "rows": items} for (t, g), items in grouped.items()]
