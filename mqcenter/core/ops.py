"""Operations endpoints: liveness, readiness, Prometheus metrics."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from mqcenter.core import metrics
from mqcenter.core.auth import principal_for_token
from mqcenter.core.errors import Forbidden, MQError, error_response
from mqcenter.longpoll import parked_pulls
from mqcenter.queue_metrics import queue_registry


@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    """The process is up (no dependency is checked)."""
    return JsonResponse({"status": "ok"})


@require_GET
def readyz(request: HttpRequest) -> HttpResponse:
    """Ready to serve: the database answers, and Redis when it is configured."""
    checks: dict[str, str] = {}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        checks["database"] = "ok"
    except Exception as exc:  # noqa: BLE001 - any failure means not ready
        checks["database"] = f"down: {type(exc).__name__}"
        connection.close()
    if settings.REDIS_URL:
        try:
            import redis

            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=0.5, socket_timeout=0.5).ping()
            checks["redis"] = "ok"
        except Exception as exc:  # noqa: BLE001
            checks["redis"] = f"down: {type(exc).__name__}"
    ready = all(value == "ok" for value in checks.values())
    response = JsonResponse({"status": "ready" if ready else "unavailable", "checks": checks},
                            status=200 if ready else 503)
    if not ready:
        response["Retry-After"] = "2"
    return response


@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    """Prometheus text format; needs a token with the admin scope (Bearer, like the API)."""
    header = request.headers.get("Authorization", "")
    if not header.lower().startswith("bearer "):
        return error_response(401, "unauthenticated", "Send an Authorization: Bearer <token> header.")
    try:
        principal = principal_for_token(header[7:].strip())
        principal.require_admin()
        if principal.biz_ids is not None:
            # The series are labelled with every business line's topics.
            raise Forbidden("Metrics need a global admin token.")
    except MQError as err:
        return error_response(err.status, err.code, err.message, err.details)
    metrics.waiting_pulls.set(parked_pulls())
    body = generate_latest(metrics.registry) + generate_latest(queue_registry)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
