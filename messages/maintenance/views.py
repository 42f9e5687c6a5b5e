"""The console's Maintenance page: each beat job's last run, flagged stale when its last good
run is too old. Reads only; needs a viewer."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from messages.maintenance.selectors import maintenance_health
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole

# A job whose last good run is older than this is flagged stale (beat runs them every minute
# or few; a day covers the daily archive job).
STALE_AFTER = {"archive": timedelta(hours=26), "cleanup": timedelta(hours=26)}
STALE_DEFAULT = timedelta(minutes=10)


@console_view(ConsoleRole.VIEWER)
def maintenance(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    jobs = maintenance_health()
    for job in jobs:
        limit = STALE_AFTER.get(job["job"], STALE_DEFAULT)
        job["stale"] = job["last_ok_at"] is None or now - job["last_ok_at"] > limit
    return render_page(request, "messages/maintenance.html", {"jobs": jobs})
