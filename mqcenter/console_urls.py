"""The operator console, mounted at the site root under the namespace `console`."""

from __future__ import annotations

from django.urls import path

from messages import urls as messages_urls
from mqcenter import chart_views
from mqcenter import console_views as views
from registry import urls as registry_urls
from reports import urls as reports_urls
from topics import urls as topics_urls

app_name = "console"

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("charts/series.json", chart_views.chart_data, name="chart_data"),
    path("login/", views.login, name="login"),
    path("logout/", views.logout, name="logout"),
    path("password/", views.password_change, name="password_change"),
    path("password/done/", views.password_change_done, name="password_change_done"),
    path("users/", views.users, name="users"),
    path("users/<int:user_id>/", views.user_detail, name="user"),
    path("audit/", views.audit, name="audit"),
    *messages_urls.urlpatterns,
    *topics_urls.urlpatterns,
    *registry_urls.urlpatterns,
    *reports_urls.urlpatterns,
]
