"""Console routes for messages, dead letters and bulk jobs (namespace `console`)."""

from __future__ import annotations

from django.urls import path, re_path

from messages import activity_views, archive_views, dead_letter_views, schedule_views, views

urlpatterns = [
    path("messages/", views.message_list, name="messages"),
    path("messages/add/", views.message_add, name="message_add"),
    path("messages/bulk/", views.messages_bulk, name="messages_bulk"),
    path("messages/<int:message_id>/", views.message_detail, name="message"),
    path("messages/<int:message_id>/edit/", views.message_edit, name="message_edit"),
    re_path(r"^messages/(?P<message_id>[0-9]+)/(?P<action>redrive|requeue|cancel|delete)/$", views.message_action, name="message_action"),
    path("archive/", archive_views.archive_list, name="archive"),
    path("archive/redrive/", archive_views.archive_redrive, name="archive_redrive"),
    path("archive/<int:message_id>/", archive_views.archive_detail, name="archive_message"),
    path("dead/", dead_letter_views.dead_letters, name="dead_letters"),
    path("dead/redrive/", dead_letter_views.dead_letters_redrive, name="dead_letters_redrive"),
    re_path(r"^dead/group/(?P<action>redrive|delete)/$", dead_letter_views.dead_letter_group_act,
            name="dead_letter_group_act"),
    path("dead/group/export/", dead_letter_views.dead_letter_group_export, name="dead_letter_group_export"),
    path("scheduled/", activity_views.scheduled, name="scheduled"),
    path("retrying/", activity_views.retrying, name="retrying"),
    path("in-flight/", activity_views.in_flight, name="in_flight"),
    path("maintenance/", activity_views.maintenance, name="maintenance"),
    path("alarms/", activity_views.alarms, name="alarms"),
    path("schedules/", schedule_views.schedule_list, name="schedules"),
    path("schedules/<int:schedule_id>/", schedule_views.schedule_edit, name="schedule"),
    re_path(r"^schedules/(?P<schedule_id>[0-9]+)/(?P<action>run|enable|disable|delete)/$", schedule_views.schedule_action,
            name="schedule_action"),
    path("transactions/", schedule_views.transaction_list, name="transactions"),
    path("jobs/", views.job_list, name="jobs"),
    path("jobs/<int:job_id>/", views.job_detail, name="job"),
]
