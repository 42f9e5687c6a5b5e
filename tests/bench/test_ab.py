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

    rates = ab.main(["--messages", "300", "--produce", "300", "--samples", "5", "--waiters", "20",
                     "--rounds", "1", "--figures", "produce,e2e,latency,burst", str(ROOT), str(tmp_path / "again")])

    assert len(rates) == 2
    for figures in rates.values():
        assert all(len(series) == 1 for series in figures.values())
        assert figures["produce_msg_s"][0] > 0 and figures["e2e_msg_s"][0] > 0 and figures["latency_p50_ms"][0] > 0
        assert figures["burst_served"] == [20.0] and figures["burst_errors"] == [0.0]
    out = capsys.readouterr().out
    assert out.count('"round": 1') == 2 and '"mariadb"' in out
    assert f"== {ROOT}" in out and "1.000 x first" in out


def test_a_tree_whose_drain_fails_is_named_with_its_error(tmp_path: Path) -> None:
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    (tmp_path / ".venv" / "bin" / "python").symlink_to(ROOT / ".venv" / "bin" / "python")

    with pytest.raises(RuntimeError, match=f"the run in {tmp_path} failed") as failed:
        ab.run(tmp_path, "import bench", {})
    assert "No module named 'bench'" in str(failed.value)


def test_every_other_round_runs_the_trees_in_reverse() -> None:
    trees = [Path("/tmp/a"), Path("/tmp/b"), Path("/tmp/c")]

    orders = [ab.round_order(trees, round_) for round_ in range(4)]

    assert orders == [trees, trees[::-1], trees, trees[::-1]]
    # over two rounds each tree runs in every place of a round of two trees
    assert [ab.round_order(trees[:2], r)[0] for r in range(2)] == trees[:2]
