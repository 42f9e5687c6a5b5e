"""Peer: django-q2 with its ORM broker on the same MariaDB. A minimal Django project."""

from __future__ import annotations

import os

SECRET_KEY = "bench-only"
USE_TZ = True
INSTALLED_APPS = ["django.contrib.contenttypes", "django_q"]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("BENCH_DQ_DATABASE", "mq_e2e_bench_djangoq"),
        "USER": "root",
        "HOST": "127.0.0.1",
        "PORT": 3306,
        "OPTIONS": {"isolation_level": "read committed", "charset": "utf8mb4"},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# Defaults of django-q2 except: the ORM broker, 2 workers, and no result rows kept (a
# no-op task has nothing to keep; keeping them would only slow django-q2 down).
Q_CLUSTER = {
    "name": "bench",
    "workers": 2,
    "orm": "default",
    "save_limit": -1,
    "timeout": 60,
    "retry": 120,
    "max_attempts": 1,
}
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}
