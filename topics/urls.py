"""Console routes for business lines, topics and API tokens (namespace `console`)."""

from __future__ import annotations

from django.urls import path

from topics import group_views, views

urlpatterns = [
    path("topics/", views.topic_list, name="topics"),
    # "+" cannot appear in a topic name, so no topic's page can shadow this one.
    path("topics/+new/", views.topic_create, name="topic_create"),
    path("topics/<str:name>/", views.topic_detail, name="topic"),
    # "+" cannot appear in a group name either.
    path("topics/<str:name>/groups/+new/", group_views.group_create, name="group_create"),
    path("topics/<str:name>/groups/<str:group>/", group_views.topic_group, name="topic_group"),
    path(
        "topics/<str:name>/groups/<str:group>/pause/", group_views.group_pause, name="group_pause"
    ),
    path(
        "topics/<str:name>/groups/<str:group>/limits/",
        group_views.group_limits,
        name="group_limits",
    ),
    path(
        "topics/<str:name>/groups/<str:group>/filter/",
        group_views.group_filter,
        name="group_filter",
    ),
    path(
        "topics/<str:name>/groups/<str:group>/replay/",
        group_views.group_replay,
        name="group_replay",
    ),
    path(
        "topics/<str:name>/groups/<str:group>/delete/",
        group_views.group_delete,
        name="group_delete",
    ),
    path("topics/<str:name>/pause/", views.topic_pause, name="topic_pause"),
    path("topics/<str:name>/delete/", views.topic_delete, name="topic_delete"),
    path("topics/<str:name>/alarm-test/", views.topic_alarm_test, name="topic_alarm_test"),
    path("biz/", views.biz_list, name="biz_list"),
    path("biz/<int:biz_id>/", views.biz_detail, name="biz"),
    path("tokens/", views.token_list, name="tokens"),
    path("tokens/<int:token_id>/revoke/", views.token_revoke, name="token_revoke"),
]
