"""`python -m bench.ab` drains the same backlog on brokers run from each given checkout, in
turn, and reports the medians: here the project's own tree twice, at toy size."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import ab

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def test_it_drains_once_per_tree_and_round_and_reports_the_medians(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "again").symlink_to(ROOT)  # the same code under a second name

    rates = ab.main(["--messages", "300", "--rounds", "1", str(ROOT), str(tmp_path / "again")])

    assert [len(values) for values in rates.values()] == [1, 1]
    assert all(value > 0 for values in rates.values() for value in values)
    out = capsys.readouterr().out
    assert out.count('"round": 1') == 2 and '"mariadb"' in out
    assert f"{ROOT}: median" in out and "1.000 x" in out


def test_a_tree_whose_drain_fails_is_named_with_its_error(tmp_path: Path) -> None:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(ROOT / ".venv" / "bin" / "python")

    with pytest.raises(RuntimeError, match=f"the drain in {tmp_path} failed") as failed:
        ab.drain(tmp_path, 10)
    assert "No module named 'bench'" in str(failed.value)
