"""``python -m mqclient run myapp.consumers``."""

from __future__ import annotations

from mqclient.cli import main

raise SystemExit(main())
