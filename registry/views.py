"""Console page for the registry: online consumers with rank/total, and broker nodes."""

from __future__ import annotations

from collections import Counter

from django.http import HttpRequest, HttpResponse

from messages.models import Message, Status
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole
from registry import services

IN_FLIGHT_SAMPLE = 2000  # in-flight counts read at most this many RUNNING rows


@console_view(ConsoleRole.VIEWER)
def registry(request: HttpRequest) -> HttpResponse:
    principal = request.console.principal
    topic = request.GET.get("topic", "").strip() or None
    consumers = services.consumers_online(principal=principal, topic=topic)
    # In-flight counts per lease holder: RUNNING rows are few (ix_msg_status).
    running = Counter(
        Message.objects.filter(status=Status.RUNNING).order_by("-id").values_list("lease_owner", flat=True)[:IN_FLIGHT_SAMPLE]
    )
    for row in consumers:
        row["in_flight"] = running.get(row["consumer"], 0)
    return render_page(request, "registry/registry.html", {
        "consumers": consumers, "brokers": services.brokers_online(), "topic": topic or "",
    }, partial="consumers")
