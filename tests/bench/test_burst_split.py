"""`python -m bench.burst_split` wakes that many waiting pulls with one produce and splits the
burst's time: here 20 pulls, one burst, on a broker of its own."""

from __future__ import annotations

import pytest

from bench import burst_split

pytestmark = pytest.mark.e2e


def test_a_burst_is_served_and_split_into_wake_times_and_cpu(capsys: pytest.CaptureFixture[str]) -> None:
    [split] = burst_split.main(["--consumers", "20", "--bursts", "1"])

    assert split["served"] == 20
    assert 0 < split["first_ms"] <= split["p50_ms"] <= split["p99_ms"] <= split["last_ms"]
    # The event loop answered the pulls, so it ran; so did the client that read them.
    assert split["loop_cpu_ms"] > 0 and split["client_cpu_ms"] > 0 and split["mariadb_cpu_ms"] > 0
    assert "served 20" in capsys.readouterr().out
