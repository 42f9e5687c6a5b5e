"""Console pages for business lines, topics (settings, groups, pause) and API tokens.

Form input is validated with the API's serializers and written through topics.services, so
the console and the REST API enforce the same rules.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings
from django.contrib import messages as flash
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_POST
from rest_framework import serializers as drf_serializers

from messages.alarms.models import Alarm
from messages.alarms.selectors import alarms_recent
from messages.alarms.webhooks import alarm_webhook_test
from messages.operations.purge import topic_remove
from mqcenter.console import form_errors, htmx_redirect, next_path, render_page
from mqcenter.core.auth import Principal
from mqcenter.core.errors import Forbidden, InvalidRequest, MQError, NotFound
from mqcenter.core.roles import console_principal, console_view
from mqcenter.dashboard import backlog_overview, live_group_rows, rates_by_group
from mqcenter.models import ConsoleRole
from topics import services
from topics.api import BizSerializer, TopicSerializer, TopicUpdateSerializer, biz_out
from topics.models import ApiToken, Biz, CheckGiveUp, DeliveryMode, Overflow, RetryStrategy, Topic
from topics.selectors import group_rows
from topics.webhooks import WEBHOOK_FORMATS, webhook_url_masked

# The group form's starting values (topics/group_views.py).
NEW_GROUP_FORM = {"group": "", "mode": DeliveryMode.QUEUE, "start": "latest", "start_time": ""}


def visible_biz(principal: Principal) -> list[Biz]:
    rows = Biz.objects.all()
    if principal.biz_ids is not None:
        rows = rows.filter(id__in=principal.biz_ids)
    return list(rows)


def visible_topics(principal: Principal, biz: str | None = None) -> list[Topic]:
    rows = Topic.objects.select_related("biz").prefetch_related("groups")
    if principal.biz_ids is not None:
        rows = rows.filter(biz_id__in=principal.biz_ids)
    if biz:
        rows = rows.filter(biz__name=biz)
    return list(rows[:2000])


def topic_for(principal: Principal, name: str) -> Topic:
    topic = services.topic_get(name)
    if not principal.may_biz(topic.biz_id):
        raise NotFound(f"Topic {name!r} does not exist.")
    return topic


def _validated(serializer_class: type[drf_serializers.Serializer], data: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data, **kwargs)
    if not serializer.is_valid():
        field, problems = next(iter(serializer.errors.items()))
        problem = problems[0] if isinstance(problems, list) else problems
        if isinstance(problem, dict):  # nested (groups)
            problem = next(iter(problem.values()))[0] if problem else "invalid"
        raise InvalidRequest(f"{field}: {problem}", details={"field": field})
    return dict(serializer.validated_data)


# --- topics ------------------------------------------------------------------------------


@console_view(ConsoleRole.VIEWER)
def topic_list(request: HttpRequest) -> HttpResponse:
    principal = request.console.principal
    biz = request.GET.get("biz", "").strip() or None
    topics = visible_topics(principal, biz)
    stats, as_of = backlog_overview(principal=principal)
    rates = rates_by_group(principal=principal)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for entry in stats:
        by_topic.setdefault(entry["topic"], []).append(dict(entry))
    rows = []
    for topic in topics:
        modes = {g.name: g.mode for g in topic.groups.all()}
        groups = by_topic.get(topic.name, [])
        for name in modes:
            if not any(g["group"] == name for g in groups):
                groups.append({"group": name, "new": 0, "running": 0, "dead": 0, "success": 0, "oldest": None})
        for g in groups:
            g["mode"] = modes.get(g["group"], "queue")
            g["rate"] = rates.get((topic.name, g["group"]))
        groups.sort(key=lambda g: g["group"])
        backlog = sum(g["new"] for g in groups)
        rows.append({"topic": topic, "groups": groups, "backlog": backlog,
                     "alarm": topic.backlog_alarm_threshold is not None and backlog >= topic.backlog_alarm_threshold})
    return render_page(request, "topics/list.html", {
        "rows": rows, "biz_names": [b.name for b in visible_biz(principal)], "biz": biz or "",
        "is_admin": console_principal(request.user, ConsoleRole.ADMIN) is not None, "as_of": as_of,
    })


def topic_form_data(post: Any) -> dict[str, Any]:
    """Form fields to the API's topic body (validated by its serializer afterwards)."""
    data: dict[str, Any] = {}
    for name in ("owner", "description", "retry_strategy", "check_give_up"):
        if name in post:
            data[name] = post.get(name, "").strip()
    for name in ("retry_count", "retry_interval_seconds", "timeout_seconds", "retention_days"):
        if post.get(name, "").strip():
            data[name] = post.get(name).strip()
    for name in ("backlog_alarm_threshold", "max_backlog", "default_ttl_seconds"):
        if name in post:
            data[name] = post.get(name).strip() or None
    if post.get("overflow"):
        data["overflow"] = post.get("overflow")
    if "alarm_emails" in post:
        data["alarm_emails"] = [e.strip() for e in post.get("alarm_emails", "").replace(",", "\n").splitlines() if e.strip()]
    if "webhook_url" in post:  # rows with the URL cleared are removed
        pairs = zip(post.getlist("webhook_url"), post.getlist("webhook_format"), strict=False)
        data["alarm_webhooks"] = [{"url": url.strip(), "format": fmt} for url, fmt in pairs if url.strip()]
    data["paused"] = post.get("paused") == "on"
    groups = []
    for name, mode in zip(post.getlist("group_name"), post.getlist("group_mode"), strict=False):
        if name.strip():
            groups.append({"group": name.strip(), "mode": mode})
    if groups:
        data["groups"] = groups
    return data


TOPIC_FORM_FIELDS = (
    "topic", "biz", "owner", "description", "retry_count", "retry_strategy", "retry_interval_seconds",
    "timeout_seconds", "retention_days", "alarm_emails", "alarm_webhooks", "backlog_alarm_threshold",
    "max_backlog", "overflow", "default_ttl_seconds", "paused", "check_give_up", "groups",
)


def topic_form_values(topic: Topic | None, post: Any = None) -> dict[str, Any]:
    """What the form's fields show: what was typed (after a refused save), else the topic's
    settings, else the defaults of a new topic."""
    if post is not None:
        values = {name: post.get(name, "") for name in TOPIC_FORM_FIELDS}
        values["paused"] = post.get("paused") == "on"
        # The last group row is the "add a group" one.
        values["new_group"] = (post.getlist("group_name") or [""])[-1]
        values["new_group_mode"] = (post.getlist("group_mode") or [""])[-1]
        return values
    if topic is None:
        return {"retry_count": django_settings.MQ_DEFAULT_RETRY_COUNT, "retry_strategy": RetryStrategy.EXPONENTIAL,
                "retry_interval_seconds": 10, "timeout_seconds": 60, "retention_days": 7,
                "check_give_up": CheckGiveUp.ROLLBACK}
    return {
        "biz": "", "owner": topic.owner, "description": topic.description, "retry_count": topic.retry_count,
        "retry_strategy": topic.retry_strategy, "retry_interval_seconds": topic.retry_interval_seconds,
        "timeout_seconds": topic.timeout_seconds, "retention_days": topic.retention_days,
        "alarm_emails": "\n".join(topic.alarm_emails), "paused": topic.paused,
        "backlog_alarm_threshold": "" if topic.backlog_alarm_threshold is None else topic.backlog_alarm_threshold,
        "max_backlog": "" if topic.max_backlog is None else topic.max_backlog,
        "check_give_up": topic.check_give_up,
        "overflow": topic.overflow,
        "default_ttl_seconds": "" if topic.default_ttl_seconds is None else topic.default_ttl_seconds,
    }


def topic_form_context(principal: Principal, topic: Topic | None, error: MQError | None = None,
                       post: Any = None, *, reveal_webhooks: bool = True) -> dict[str, Any]:
    """The form's context; after a refused save, `post` keeps what was typed and the error
    stands beside its field. `reveal_webhooks`: whether the webhook URLs are shown whole (to
    the topic's admins); others see only their hosts, since chat tools put the bot's secret
    in the URL."""
    if post is not None and "webhook_url" in post:  # a refused form shows what was typed
        pairs = zip(post.getlist("webhook_url"), post.getlist("webhook_format"), strict=False)
        webhooks = [{"url": url, "format": fmt, "saved": False} for url, fmt in pairs if url.strip()]
    else:
        saved = topic.alarm_webhooks if topic else []
        webhooks = [{"url": w["url"] if reveal_webhooks else webhook_url_masked(w["url"]), "format": w["format"],
                     "secret": w.get("secret", "") if reveal_webhooks else "", "saved": True} for w in saved]
    return {
        "topic": topic, "biz_choices": visible_biz(principal),
        "strategies": RetryStrategy.values, "modes": DeliveryMode.values, "overflows": Overflow.values,
        "webhooks": webhooks, "webhook_formats": WEBHOOK_FORMATS, "reveal_webhooks": reveal_webhooks,
        "give_up_choices": [(CheckGiveUp.ROLLBACK, _("roll back")), (CheckGiveUp.COMMIT, _("commit"))],
        "f": topic_form_values(topic, post),
        "errors": form_errors(error, TOPIC_FORM_FIELDS) if error else {},
    }


@console_view(ConsoleRole.ADMIN)
def topic_create(request: HttpRequest) -> HttpResponse:
    principal = request.console.principal
    if request.method == "POST":
        try:
            data = topic_form_data(request.POST)
            data["topic"] = request.POST.get("topic", "").strip()
            biz_name = request.POST.get("biz", "").strip() or None
            clean = _validated(TopicSerializer, data)
            biz = _biz_named(principal, biz_name)
            if biz is None and principal.biz_ids is not None:
                raise InvalidRequest(_("Choose the business line that owns the topic."), details={"field": "biz"})
            name, groups = clean.pop("topic"), clean.pop("groups", None)
            topic = services.topic_create(actor=principal.name, name=name, biz=biz, settings=clean, groups=groups)
        except MQError as exc:
            context = topic_form_context(principal, None, exc, request.POST)
            return render_page(request, "topics/form.html", context, status=exc.status)
        flash.success(request, _("Created topic %(name)s.") % {"name": topic.name})
        return htmx_redirect(request, reverse("console:topic", args=[topic.name]))
    return render_page(request, "topics/form.html", topic_form_context(principal, None))


@console_view(ConsoleRole.VIEWER)
def topic_detail(request: HttpRequest, name: str) -> HttpResponse:
    """Settings (editable by admins) and the topic's groups with their state and controls
    (topics/group_views.py)."""
    topic = topic_for(request.console.principal, name)
    admin = console_principal(request.user, ConsoleRole.ADMIN)
    may_edit = admin is not None and admin.may_biz(topic.biz_id)
    if request.method == "POST":
        if admin is None or not may_edit:
            raise Forbidden(_("Only an admin of this business line changes topic settings."))
        try:
            clean = _validated(TopicUpdateSerializer, topic_form_data(request.POST), partial=True)
            biz = _biz_named(admin, request.POST.get("biz", "").strip() or None)
            groups = clean.pop("groups", None)
            services.topic_update(actor=admin.name, topic=topic, settings=clean, biz=biz, groups=groups)
        except (InvalidRequest, Forbidden) as exc:
            context = _topic_page_context(admin, topic, may_edit, exc, request.POST)
            return render_page(request, "topics/form.html", context, status=400)
        flash.success(request, _("Saved topic %(name)s.") % {"name": topic.name})
        return htmx_redirect(request, reverse("console:topic", args=[topic.name]))
    return render_page(request, "topics/form.html", _topic_page_context(request.console.principal, topic, may_edit))


def _topic_page_context(
    principal: Principal, topic: Topic, may_edit: bool, error: MQError | None = None, post: Any = None
) -> dict[str, Any]:
    context = topic_form_context(principal, topic, error, post, reveal_webhooks=may_edit)
    context.update(may_edit=may_edit, group_rows=group_rows(topic=topic), new_group=dict(NEW_GROUP_FORM))
    if may_edit:
        tests = alarms_recent(principal=principal, topic=topic.name, kind=Alarm.Kind.TEST, limit=5)
        context.update(webhook_tests=tests, webhook_tests_pending=any(a.webhooks_due_at for a in tests))
    context.update(live_group_rows(principal=principal, topic=topic.name))
    return context


@require_POST
@console_view(ConsoleRole.ADMIN)
def topic_pause(request: HttpRequest, name: str) -> HttpResponse:
    principal = request.console.principal
    topic = topic_for(principal, name)
    paused = request.POST.get("paused") == "1"
    target = next_path(request, reverse("console:topics"))  # before anything changes
    services.topic_update(actor=principal.name, topic=topic, settings={"paused": paused})
    flash.success(request, (_("Paused topic %(name)s.") if paused else _("Resumed topic %(name)s.")) % {"name": topic.name})
    return htmx_redirect(request, target)


@require_POST
@console_view(ConsoleRole.ADMIN)
def topic_alarm_test(request: HttpRequest, name: str) -> HttpResponse:
    """Queue a test alarm to one of the topic's webhook targets: the outbound worker posts it,
    never this request's thread; the topic page shows how it went."""
    principal = request.console.principal
    topic = topic_for(principal, name)
    url = request.POST.get("url", "")
    alarm_webhook_test(topic=topic, url=url, actor=principal.name)
    flash.success(request, _("Test alarm to %(target)s queued; its outcome shows under Test alarms.")
                  % {"target": webhook_url_masked(url)})
    return htmx_redirect(request, reverse("console:topic", args=[topic.name]))


@require_POST
@console_view(ConsoleRole.ADMIN)
def topic_delete(request: HttpRequest, name: str) -> HttpResponse:
    principal = request.console.principal
    topic = topic_for(principal, name)
    job = topic_remove(principal=principal, topic=topic)
    if job is not None:
        flash.success(
            request,
            ngettext(
                "Deleted topic %(name)s; its %(n)s message is being removed (job %(job)s).",
                "Deleted topic %(name)s; its %(n)s messages are being removed (job %(job)s).",
                job.total,
            )
            % {"name": name, "n": job.total, "job": job.id},
        )
    else:
        flash.success(request, _("Deleted topic %(name)s.") % {"name": name})
    return htmx_redirect(request, reverse("console:topics"))


def _biz_named(principal: Principal, name: str | None) -> Biz | None:
    if name is None:
        return None
    biz = Biz.objects.filter(name=name).first()
    if biz is None or not principal.may_biz(biz.id):
        raise InvalidRequest(_("Business line %(name)s does not exist.") % {"name": repr(name)}, details={"field": "biz"})
    return biz


# --- business lines ----------------------------------------------------------------------


@console_view(ConsoleRole.ADMIN)
def biz_list(request: HttpRequest) -> HttpResponse:
    principal = request.console.principal
    errors: dict[str, str] = {}
    typed = {k: request.POST.get(k, "").strip() for k in ("name", "title", "description")}
    if request.method == "POST":
        if principal.biz_ids is not None:
            raise Forbidden(_("Only an unrestricted admin creates business lines."))
        try:
            data = _validated(BizSerializer, typed)
            biz = services.biz_create(actor=principal.name, **data)
        except MQError as exc:
            errors = form_errors(exc, typed)
        else:
            flash.success(request, _("Created business line %(name)s.") % {"name": biz.name})
            return htmx_redirect(request, reverse("console:biz_list"))
    totals: dict[int | None, dict[str, int]] = {}
    topic_biz = dict(Topic.objects.values_list("name", "biz_id"))
    for entry in backlog_overview(principal=principal)[0]:
        t = totals.setdefault(topic_biz.get(entry["topic"]), {"backlog": 0, "running": 0, "dead": 0})
        t["backlog"] += entry["new"]
        t["running"] += entry["running"]
        t["dead"] += entry["dead"]
    rows = []
    for biz in visible_biz(principal):
        rows.append({"biz": biz, "topics": biz.topics.count(), **totals.get(biz.id, {"backlog": 0, "running": 0, "dead": 0})})
    return render_page(request, "topics/biz_list.html", {
        "rows": rows, "errors": errors, "typed": typed, "may_create": principal.biz_ids is None,
    }, status=400 if errors else 200)


@console_view(ConsoleRole.ADMIN)
def biz_detail(request: HttpRequest, biz_id: int) -> HttpResponse:
    principal = request.console.principal
    biz = get_object_or_404(Biz, id=biz_id)
    if not principal.may_biz(biz.id):
        raise NotFound(_("No such business line."))
    if request.method == "POST":
        if request.POST.get("delete") == "1":
            services.biz_delete(actor=principal.name, biz=biz)
            flash.success(request, _("Deleted business line %(name)s.") % {"name": biz.name})
            return htmx_redirect(request, reverse("console:biz_list"))
        data = _validated(BizSerializer, {"name": biz.name, **{k: request.POST.get(k, "").strip() for k in ("title", "description")}})
        data.pop("name")
        services.biz_update(actor=principal.name, biz=biz, changes=data)
        flash.success(request, _("Saved business line %(name)s.") % {"name": biz.name})
        return htmx_redirect(request, reverse("console:biz", args=[biz.id]))
    return render_page(request, "topics/biz_detail.html", {"biz": biz_out(biz), "topics": biz.topics.all()})


# --- tokens ------------------------------------------------------------------------------


TOKEN_FORM_FIELDS = ("name", "biz", "scopes")


@console_view(ConsoleRole.ADMIN)
def token_list(request: HttpRequest) -> HttpResponse:
    """Tokens of the admin's business lines; creating one shows its secret exactly once."""
    principal = request.console.principal
    secret, created, errors = "", None, {}
    typed = {name: request.POST.get(name, "").strip() for name in TOKEN_FORM_FIELDS}
    if request.method == "POST":
        try:
            biz = _biz_named(principal, request.POST.get("biz", "").strip() or None)
            if biz is None and principal.biz_ids is not None:
                raise Forbidden(_("Choose one of your business lines for the token."), details={"field": "biz"})
            scopes = [s.strip() for s in request.POST.get("scopes", "").replace(",", " ").split() if s.strip()]
            secret, created = services.token_create(
                actor=principal.name, scopes=scopes, biz=biz, name=request.POST.get("name", "").strip()[:200],
                created_by=request.user,
            )
        except (InvalidRequest, Forbidden) as exc:
            errors = form_errors(exc, TOKEN_FORM_FIELDS)
        else:
            typed = {}  # created: the form starts empty again
    rows = ApiToken.objects.select_related("biz").order_by("-created_at")
    if principal.biz_ids is not None:
        rows = rows.filter(biz_id__in=principal.biz_ids)
    response = render_page(request, "topics/tokens.html", {
        "tokens": rows[:500], "secret": secret, "created": created, "errors": errors, "typed": typed,
        "biz_choices": visible_biz(principal), "global": principal.biz_ids is None,
    }, status=400 if errors else 200)
    response["Cache-Control"] = "no-store"  # the secret must not linger in caches
    return response


@require_POST
@console_view(ConsoleRole.ADMIN)
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    principal = request.console.principal
    token = ApiToken.objects.filter(id=token_id).first()
    if token is None or not principal.may_biz(token.biz_id) or (token.biz_id is None and principal.biz_ids is not None):
        raise NotFound(_("No such token."))
    services.token_revoke(actor=principal.name, token=token)
    flash.success(request, _("Revoked token %(name)s.") % {"name": token.name or token.prefix})
    return htmx_redirect(request, reverse("console:tokens"))
