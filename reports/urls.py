"""Console routes for the Spark reports (namespace `console`)."""

from __future__ import annotations

from django.urls import path

from reports import views

urlpatterns = [
    path("reports/", views.report_list, name="reports"),
    path("reports/run/", views.report_run_now, name="report_run"),
    path("reports/<int:run_id>/", views.report_detail, name="report"),
    path("reports/<int:run_id>/chart.png", views.report_chart, name="report_chart"),
    path("reports/<int:run_id>/chart.json", views.report_chart_data, name="report_chart_data"),
]
