"""Console routes for messages and their capabilities (namespace `console`)."""

from __future__ import annotations

from django.urls import path, re_path

from messages import views
from messages.alarms import views as alarm_views
from messages.archive import views as archive_views
from messages.batches import views as batch_views
from messages.maintenance import views as maintenance_views
from messages.operations import views as operation_views
from messages.schedules import views as schedule_views
from messages.transactions import views as transaction_views

urlpatterns = [
    path("messages/", views.message_list, name="messages"),
    path("messages/add/", views.message_add, name="message_add"),
    path("messages/bulk/", operation_views.messages_bulk, name="messages_bulk"),
    path("messages/<int:message_id>/", views.message_detail, name="message"),
    path("messages/<int:message_id>/edit/", views.message_edit, name="message_edit"),
    re_path(r"^messages/(?P<message_id>[0-9]+)/(?P<action>redrive|requeue|cancel|delete)/$", views.message_action, name="message_action"),
    path("archive/", archive_views.archive_list, name="archive"),
    path("archive/redrive/", archive_views.archive_redrive, name="archive_redrive"),
    path("archive/<int:message_id>/", archive_views.archive_detail, name="archive_message"),
    path("dead/", operation_views.dead_letters, name="dead_letters"),
    path("dead/redrive/", operation_views.dead_letters_redrive, name="dead_letters_redrive"),
    re_path(r"^dead/group/(?P<action>redrive|delete)/$", operation_views.dead_letter_group_act,
            name="dead_letter_group_act"),
    path("dead/group/export/", operation_views.dead_letter_group_export, name="dead_letter_group_export"),
    path("scheduled/", views.scheduled, name="scheduled"),
    path("retrying/", views.retrying, name="retrying"),
    path("in-flight/", views.in_flight, name="in_flight"),
    path("maintenance/", maintenance_views.maintenance, name="maintenance"),
    path("alarms/", alarm_views.alarms, name="alarms"),
    path("schedules/", schedule_views.schedule_list, name="schedules"),
    path("schedules/preview/", schedule_views.schedule_preview, name="schedule_preview"),
    path("schedules/<int:schedule_id>/", schedule_views.schedule_edit, name="schedule"),
    re_path(r"^schedules/(?P<schedule_id>[0-9]+)/(?P<action>run|enable|disable|delete)/$", schedule_views.schedule_action,
            name="schedule_action"),
    path("transactions/", transaction_views.transaction_list, name="transactions"),
    path("batches/", batch_views.batch_list, name="batches"),
    path("jobs/", operation_views.job_list, name="jobs"),
    path("jobs/<int:job_id>/", operation_views.job_detail, name="job"),
]
