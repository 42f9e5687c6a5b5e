#!/usr/bin/env bash
# Install MQ Center and its dependencies into a virtualenv, quietly, and only when
# pyproject.toml changed since the last install (the quick start runs this on every start).
# Usage: scripts/install.sh [VENV (default .venv)] [extra pip install arguments...]
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${1:-.venv}
shift || true
stamp="$venv/.mq-installed"
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
[ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && exit 0
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "Installing MQ Center into $venv/ ..."
"$venv/bin/pip" install -q --disable-pip-version-check --upgrade pip >/dev/null 2>&1 || true
# Build tools' notices (setuptools' editable-install boxes) are for packagers, not for a
# first run: the warnings are off for the install only; errors still show, and fail.
PYTHONWARNINGS=ignore "$venv/bin/pip" install -q --disable-pip-version-check -e . "$@"
echo "$want" > "$stamp"
