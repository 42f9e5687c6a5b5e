"""URL configuration: the REST API under /api/v1/, operations, docs and the console."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from django.views.i18n import set_language
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from messages import api as messages_api
from messages.archive import api as archive_api
from messages.batches import api as batches_api
from messages.delivery import api as delivery_api
from messages.maintenance import views as maintenance_views
from messages.operations import api as operations_api
from messages.schedules import api as schedules_api
from messages.stats import api as stats_api
from messages.transactions import api as transactions_api
from mqcenter.core import ops
from registry import api as registry_api
from topics import api as topics_api
from topics import group_api

api_v1 = [
    path("messages", delivery_api.MessagesView.as_view(), name="messages"),
    path("messages/redrive", operations_api.RedriveView.as_view(), name="messages-redrive"),
    path("messages/requeue", operations_api.RequeueView.as_view(), name="messages-requeue"),
    path("messages/delete", operations_api.BulkDeleteView.as_view(), name="messages-delete"),
    path("messages/cancel", operations_api.BulkCancelView.as_view(), name="messages-cancel"),
    path("messages/move", operations_api.MoveView.as_view(), name="messages-move"),
    path("messages/<int:message_id>", messages_api.MessageDetailView.as_view(), name="message-detail"),
    path("messages/<int:message_id>/cancel", messages_api.MessageCancelView.as_view(), name="message-cancel"),
    path("archive/messages", archive_api.ArchiveMessagesView.as_view(), name="archive-messages"),
    path("archive/messages/redrive", archive_api.ArchiveRedriveView.as_view(), name="archive-redrive"),
    path("archive/messages/<int:archived_id>", archive_api.ArchiveMessageView.as_view(), name="archive-message"),
    path("transactions/<str:transaction_id>", transactions_api.TransactionView.as_view(), name="transaction"),
    path("transactions/<str:transaction_id>/commit", transactions_api.TransactionCommitView.as_view(), name="transaction-commit"),
    path("transactions/<str:transaction_id>/rollback", transactions_api.TransactionRollbackView.as_view(), name="transaction-rollback"),
    path("batches", batches_api.BatchesView.as_view(), name="batches"),
    path("batches/<str:batch_id>", batches_api.BatchView.as_view(), name="batch"),
    path("schedules", schedules_api.SchedulesView.as_view(), name="schedules"),
    path("schedules/<int:schedule_id>", schedules_api.ScheduleView.as_view(), name="schedule"),
    path("schedules/<int:schedule_id>/run", schedules_api.ScheduleRunView.as_view(), name="schedule-run"),
    path("jobs/<int:job_id>", operations_api.JobView.as_view(), name="job-detail"),
    path("pull", delivery_api.PullView.as_view(), name="pull"),
    path("ack", delivery_api.AckView.as_view(), name="ack"),
    path("extend", delivery_api.ExtendView.as_view(), name="extend"),
    path("release", delivery_api.ReleaseView.as_view(), name="release"),
    path("stats", stats_api.StatsView.as_view(), name="stats"),
    path("biz", topics_api.BizListView.as_view(), name="biz-list"),
    path("biz/<int:biz_id>", topics_api.BizDetailView.as_view(), name="biz-detail"),
    path("topics", topics_api.TopicListView.as_view(), name="topic-list"),
    path("topics/<str:topic>", topics_api.TopicDetailView.as_view(), name="topic-detail"),
    path("topics/<str:topic>/groups", group_api.GroupListView.as_view(), name="group-list"),
    path("topics/<str:topic>/groups/<str:group>", group_api.GroupDetailView.as_view(), name="group-detail"),
    path("topics/<str:topic>/groups/<str:group>/replay", group_api.GroupReplayView.as_view(), name="group-replay"),
    path("registry/consumers", registry_api.ConsumersView.as_view(), name="registry-consumers"),
    path("registry/consumers/<str:consumer>", registry_api.ConsumerView.as_view(), name="registry-consumer"),
    path("registry/brokers", registry_api.BrokersView.as_view(), name="registry-brokers"),
]

urlpatterns = [
    path("api/v1/", include((api_v1, "api"), namespace="api")),
    path("api/schema/", SpectacularAPIView.as_view(authentication_classes=[], permission_classes=[]), name="schema"),
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="schema", authentication_classes=[], permission_classes=[]), name="docs"),
    path("healthz", ops.healthz, name="healthz"),
    path("readyz", ops.readyz, name="readyz"),
    path("healthz/maintenance", maintenance_views.maintenance_healthz, name="healthz-maintenance"),
    path("metrics", ops.metrics_view, name="metrics"),
    # The admin signs in through the console's login, with its throttle: it has no login of its own.
    path("admin/login/", RedirectView.as_view(url="/login/?next=/admin/", query_string=False)),
    path("admin/", admin.site.urls),
    # The console's language switch (a POST with CSRF; `next` must be on this site).
    path("i18n/setlang/", set_language, name="set_language"),
    path("", include("mqcenter.console_urls", namespace="console")),
]
