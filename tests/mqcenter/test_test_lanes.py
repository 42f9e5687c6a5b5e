"""The lanes of scripts/test.sh name test files and folders by path: a moved or renamed test
must not leave a lane collecting nothing (pytest then ends the lane, and CI, with "no tests
ran")."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_test_path_the_lanes_name_exists() -> None:
    script = (ROOT / "scripts" / "test.sh").read_text()
    paths = sorted(set(re.findall(r"(?<![\w/])(tests/[\w/.-]+)", script)))
    assert len(paths) > 10, paths  # the lanes are read at all
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, f"scripts/test.sh names test paths that do not exist: {missing}"
