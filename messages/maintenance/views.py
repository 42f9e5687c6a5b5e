"""The console's Maintenance page (each scheduled job's interval, last run, lag and outcome)
and `/healthz/maintenance` (503 while a job is stale, for an orchestrator). Reads only."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET

from messages.maintenance.selectors import maintenance_health
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole


@console_view(ConsoleRole.VIEWER)
def maintenance(request: HttpRequest) -> HttpResponse:
    return render_page(request, "messages/maintenance.html", {"jobs": maintenance_health()})


@require_GET
def maintenance_healthz(request: HttpRequest) -> HttpResponse:
    """200 while every scheduled job runs on time, 503 naming the stale ones (beat or the
    worker is down, or a job fails). Job names, lags and outcomes only: no credentials, no
    business data."""
    jobs = maintenance_health()
    stale = [j["job"] for j in jobs if j["stale"]]
    body = {
        "status": "stale" if stale else "ok",
        "stale": stale,
        "jobs": [{"job": j["job"], "interval_seconds": j["interval_seconds"], "outcome": j["outcome"],
                  "last_ok_at": j["last_ok_at"], "lag_seconds": j["lag_seconds"]} for j in jobs],
    }
    response = JsonResponse(body, status=503 if stale else 200)
    if stale:
        response["Retry-After"] = "30"
    return response
