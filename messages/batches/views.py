"""The console's batches: recent batches with their progress. Reads only; needs a viewer."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from messages.batches.services import batches_recent
from mqcenter.console import render_page
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole


@console_view(ConsoleRole.VIEWER)
def batch_list(request: HttpRequest) -> HttpResponse:
    """The latest batches, newest first, each with its finished share by outcome."""
    rows = []
    for batch in batches_recent(principal=request.console.principal):
        done = batch.total - batch.pending
        rows.append({"batch": batch, "done": done,
                     "percent": 100 if batch.total == 0 else round(100 * done / batch.total)})
    return render_page(request, "messages/batches.html", {"rows": rows})
