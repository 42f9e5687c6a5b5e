"""examples/java: a producer and a consumer written with the JDK alone (java.net.http), compiled
with javac and run against a real broker: the consumer pulls with a long-poll wait, acks, and
reads each message's trace."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import ROOT, BrokerServer

pytestmark = pytest.mark.e2e

JAVA = ROOT / "examples" / "java"


@pytest.fixture(scope="module")
def broker() -> Any:
    server = BrokerServer("java_example")
    server.setup()
    try:
        yield server, server.start()
    finally:
        server.teardown()


def _java(tool: str) -> str:
    path = shutil.which(tool)
    assert path, f"{tool} is missing: apt-get install default-jdk-headless (scripts/test.sh installs it)"
    return path


def test_the_java_example_produces_pulls_acks_and_reads_the_trace(broker: Any, tmp_path: Path) -> None:
    server, url = broker
    classes = tmp_path / "classes"
    compiled = subprocess.run([_java("javac"), "-Xlint:all", "-Werror", "-d", str(classes),
                               *sorted(str(p) for p in JAVA.glob("*.java"))],
                              capture_output=True, text=True, timeout=180, check=False)
    assert compiled.returncode == 0, compiled.stderr
    env = {**os.environ, "MQ_BASE": url, "MQ_TOKEN": server.token}

    def run(main: str, *args: str) -> list[str]:
        done = subprocess.run([_java("java"), "-cp", str(classes), main, *args], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.splitlines()

    produced = run("Producer", "3")
    ids = [int(line.split()[1]) for line in produced]
    assert [line.split(" ", 2)[2] for line in produced] == ["orders/billing"] * 3
    assert run("Producer", "3") == [f"{line} (duplicate)" for line in produced]  # dedup_key

    consumed = run("Consumer", "3")
    assert [line for line in consumed if line.startswith("pulled")] == [
        f"pulled {i} attempt 1 data {{\"order\":{n},\"amount\":{10.5 * n}}}" for n, i in enumerate(ids, 1)]
    assert [line for line in consumed if line.startswith("acked")] == [f"acked {i} success" for i in ids]
    traces = [line for line in consumed if line.startswith("trace")]
    assert len(traces) == 3
    for i, line in zip(ids, traces, strict=True):
        assert line.startswith(f"trace {i} SUCCESS:"), line
        assert line.split(":", 1)[1].split() == ["produced", "pulled", "acked"], line
    rows = server.sql("SELECT id, status, last_log FROM mq_message WHERE id IN (%s, %s, %s) ORDER BY id", *ids)
    assert [(r[0], r[1]) for r in rows] == [(i, "SUCCESS") for i in ids]
    assert all(r[2].startswith("charged by java-") for r in rows)
    # Nothing left: an empty pull (after the long-poll's wait) ends the consumer.
    assert run("Consumer") == []
