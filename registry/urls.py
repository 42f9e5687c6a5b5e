"""Console routes for the registry (namespace `console`)."""

from __future__ import annotations

from django.urls import path

from registry import views

urlpatterns = [
    path("registry/", views.registry, name="registry"),
]
