"""The Celery app: maintenance jobs (beat) and background bulk jobs."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mqcenter.settings")

app = Celery("mqcenter")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
