"""docs/architecture.md names modules and folders by path; a move that forgets the doc fails
here. Every path in backticks (`messages/delivery/`, `delivery/api.py:PullView`) must exist,
a name after the colon must be defined in that module, a dotted name
(`mqcenter.core.db.retry_on_lock_conflict`) must be one a module defines, and a bare module
name (`sql_insert.py`) must be the name of one of the project's modules.

The doc writes a path from the repository's root, or, within the part about `messages/`,
from that app (`delivery/acks.py`), from the delivery core (`claims/gate.py`), from
`mqcenter/` (`core/`) or from `tests/` (`e2e/`): a path resolves when it exists under one of
those. Patterns (`messages/<capability>/`, `templates/messages/*.html`) are not checked."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
BASES = ["", "messages/", "messages/delivery/", "mqcenter/", "tests/"]
PACKAGES = ("messages", "topics", "registry", "mqcenter", "reports", "mqclient", "spark")
# A path: folders and a file name, or folders ending in "/"; optionally ":name".
PATH = re.compile(r"^(?P<path>(?:[\w.]+/)+(?:[\w.]+\.\w+)?)(?::(?P<name>\w+))?$")
# A dotted name in one of the packages: mqcenter.core.db.retry_on_lock_conflict.
DOTTED = re.compile(r"^\w+(?:\.\w+)+$")
BARE = re.compile(r"^\w+\.py$")


def _spans() -> list[str]:
    return re.findall(r"`([^`\n]+)`", DOC.read_text())


def _named_paths() -> list[tuple[str, str | None]]:
    found = []
    for span in _spans():
        match = PATH.match(span)
        if match and not span.startswith(("../", "/")):
            found.append((match["path"], match["name"]))
    return found


def _resolve(path: str) -> Path | None:
    for base in BASES:
        candidate = ROOT / base / path
        if candidate.exists() and (candidate.is_dir() == path.endswith("/")):
            return candidate
    return None


def _defines(module: Path, name: str) -> bool:
    text = module.read_text()
    return re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+{name}\b|^{name}\s*[:=]", text, re.MULTILINE) is not None


def test_it_names_paths() -> None:
    paths = {path for path, _ in _named_paths()}
    assert {"messages/delivery/", "delivery/produce.py", "routing/filters.py", "batches/progress.py"} <= paths


def test_every_path_it_names_exists() -> None:
    missing = sorted({path for path, _ in _named_paths() if _resolve(path) is None})
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_name_after_a_module_is_defined_there() -> None:
    undefined = sorted(
        f"{path}:{name}"
        for path, name in _named_paths()
        if name and (module := _resolve(path)) is not None and not _defines(module, name)
    )
    assert not undefined, f"docs/architecture.md names what its module does not define: {undefined}"


def test_every_dotted_name_it_gives_is_defined() -> None:
    undefined = []
    for span in _spans():
        parts = span.split(".")
        if not DOTTED.match(span) or span.endswith(".py") or parts[0] not in PACKAGES:
            continue
        # The longest prefix that is a module (or a package), then the name it must define.
        for cut in range(len(parts), 0, -1):
            base = ROOT.joinpath(*parts[:cut])
            module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else base / "__init__.py"
            if module.is_file():
                if cut < len(parts) and not _defines(module, parts[cut]):
                    undefined.append(span)
                break
        else:
            undefined.append(span)
    assert not undefined, f"docs/architecture.md gives dotted names nothing defines: {undefined}"


def test_every_bare_module_name_is_one_of_the_project() -> None:
    names = {path.name for package in PACKAGES for path in (ROOT / package).rglob("*.py")}
    unknown = sorted({span for span in _spans() if BARE.match(span) and span not in names})
    assert not unknown, f"docs/architecture.md names modules the project does not have: {unknown}"
