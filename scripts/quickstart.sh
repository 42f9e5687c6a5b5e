#!/usr/bin/env bash
# Install and run MQ Center on embedded defaults: SQLite, in-memory channel layer,
# filesystem Celery transport. No external server needed.
# Usage: ./scripts/quickstart.sh [--port 8000] [--host 127.0.0.1]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install.sh .venv
unset DATABASE_URL REDIS_URL CELERY_BROKER_URL
exec .venv/bin/python manage.py quickstart "$@"
