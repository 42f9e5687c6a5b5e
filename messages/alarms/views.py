"""The console's alarm history, with each alarm's e-mail and webhook deliveries. Reads only;
needs a viewer."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from messages.alarms.selectors import alarms_recent
from mqcenter.console import render_page
from mqcenter.core.db import reads_replica
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole


@console_view(ConsoleRole.VIEWER)
@reads_replica
def alarms(request: HttpRequest) -> HttpResponse:
    rows = alarms_recent(principal=request.console.principal, limit=200)
    return render_page(request, "messages/alarms.html", {"alarms": rows})
