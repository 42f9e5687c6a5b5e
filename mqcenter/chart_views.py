"""The console's chart data: JSON series read by static/console/charts.js."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse

from mqcenter.charts import chart_series
from mqcenter.core.db import reads_replica
from mqcenter.core.errors import MQError
from mqcenter.core.roles import console_view
from mqcenter.models import ConsoleRole


@console_view(ConsoleRole.VIEWER)
@reads_replica
def chart_data(request: HttpRequest) -> HttpResponse:
    """?range=1h|24h|7d[&topic=...][&group=...]; a topic the user may not see is a 404."""
    try:
        series = chart_series(
            principal=request.console.principal, range_name=request.GET.get("range", "1h"),
            topic=request.GET.get("topic") or None, group=request.GET.get("group") or None,
        )
    except MQError as exc:
        return JsonResponse(exc.body(), status=exc.status)
    return JsonResponse(series)
