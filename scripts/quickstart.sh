#!/usr/bin/env bash
# Install and run MQ Center on embedded defaults: SQLite, in-memory channel layer,
# filesystem Celery transport. No external server needed.
# Usage: ./scripts/quickstart.sh [--port 8000] [--host 127.0.0.1]
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null 2>&1 || true
.venv/bin/pip install -q -e . 2>&1 | grep -v -i warning || true
unset DATABASE_URL REDIS_URL CELERY_BROKER_URL
exec .venv/bin/python manage.py quickstart "$@"
