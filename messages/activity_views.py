"""Console pages an operator expects beside the message list: scheduled, retrying, in flight
by consumer, maintenance health and alarm history. Reads only; every page needs a viewer."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.translation import gettext as _

from messages import activity, selectors
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole

# A job whose last good run is older than this is flagged stale (beat runs them every minute
# or few; a day covers the daily archive job).
STALE_AFTER = {"archive": timedelta(hours=26), "cleanup": timedelta(hours=26)}
STALE_DEFAULT = timedelta(minutes=10)


@console_view(ConsoleRole.VIEWER)
def scheduled(request: HttpRequest) -> HttpResponse:
    rows = activity.messages_scheduled(principal=request.console.principal)
    return render_page(request, "messages/activity_list.html", {"rows": rows, "title": _("Scheduled messages"),
                                                                "what": _("NEW messages due later, soonest first")})


@console_view(ConsoleRole.VIEWER)
def retrying(request: HttpRequest) -> HttpResponse:
    rows = activity.messages_retrying(principal=request.console.principal)
    return render_page(request, "messages/activity_list.html", {
        "rows": rows, "title": _("Retrying messages"),
        "what": _("delivered before and waiting for their next try (from the newest %(n)s waiting messages)")
        % {"n": activity.SCAN_BOUND},
    })


@console_view(ConsoleRole.VIEWER)
def in_flight(request: HttpRequest) -> HttpResponse:
    consumers = activity.consumers_in_flight(principal=request.console.principal)
    return render_page(request, "messages/in_flight.html", {"consumers": consumers})


@console_view(ConsoleRole.VIEWER)
def maintenance(request: HttpRequest) -> HttpResponse:
    now = timezone.now()
    jobs = selectors.maintenance_health()
    for job in jobs:
        limit = STALE_AFTER.get(job["job"], STALE_DEFAULT)
        job["stale"] = job["last_ok_at"] is None or now - job["last_ok_at"] > limit
    return render_page(request, "messages/maintenance.html", {"jobs": jobs})


@console_view(ConsoleRole.VIEWER)
def alarms(request: HttpRequest) -> HttpResponse:
    rows = selectors.alarms_recent(principal=request.console.principal, limit=200)
    return render_page(request, "messages/alarms.html", {"alarms": rows})
