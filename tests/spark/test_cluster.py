"""Both reports on a real Spark standalone cluster: a master and one worker started from the
installed PySpark (its spark-class script, on 127.0.0.1, free ports), executors reading
MariaDB over JDBC and the Parquet archive. The figures equal the local run's.

The reports run in `manage.py runreport` processes (a process has one SparkSession, and
this test process's is local), pointed at the cluster by SPARK_MASTER as an operator would.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from tests.spark.world import SINCE, UNTIL

pytestmark = [pytest.mark.spark, pytest.mark.django_db, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(__import__("pyspark").__file__).parent
START_TIMEOUT = 90.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(condition: Any, what: str, timeout: float = START_TIMEOUT) -> None:
    """Poll `condition` until it holds (the cluster's daemons report no readiness otherwise)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)


def master_state(ui_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=2) as answer:
            return json.load(answer)
    except OSError:
        return {}


def spark_env(tmp: Path) -> dict[str, str]:
    return {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(tmp), "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_NO_DAEMONIZE": "1",
            "PYSPARK_PYTHON": sys.executable}


def start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        # Its own process group: teardown stops the script and the JVM it starts together.
        return subprocess.Popen([str(SPARK_HOME / "bin" / "spark-class"), *args], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """A standalone master and one worker (1 core, 1 GiB), stopped at teardown."""
    tmp = tmp_path_factory.mktemp("spark-cluster")
    env = spark_env(tmp)
    port, ui = free_port(), free_port()
    master = start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                    "--webui-port", str(ui)], env, tmp / "master.log")
    processes = [master]
    try:
        wait_for(lambda: master_state(ui).get("status") == "ALIVE", "the Spark master")
        worker = start(["org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}", "--host", "127.0.0.1",
                        "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                        "--work-dir", str(tmp / "work")], env, tmp / "worker.log")
        processes.append(worker)
        wait_for(lambda: master_state(ui).get("aliveworkers", 0) >= 1, "the Spark worker to register")
        yield {"master": f"spark://127.0.0.1:{port}", "ui": ui}
    finally:
        for process in reversed(processes):
            stop(process)


def run_on(master: str, kind: str, archive_dir: str) -> dict[str, Any]:
    db = settings.DATABASES["default"]
    env = {**spark_env(Path(archive_dir)), "SPARK_MASTER": master, "DJANGO_SETTINGS_MODULE": "mqcenter.test_settings",
           "DATABASE_URL": f"mysql://{db['USER'] or 'root'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 3306}/{db['NAME']}",
           "MQ_ARCHIVE_PARQUET_DIR": archive_dir, "MQ_REPORT_JDBC_PARTITIONS": "3",
           "MQ_SPARK_SHUFFLE_PARTITIONS": "2", "SPARK_DRIVER_MEMORY": "768m"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "runreport", kind, "--since", SINCE.isoformat(),
         "--until", UNTIL.isoformat(), "--json"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def same(cluster_value: Any, local_value: Any) -> bool:
    if isinstance(local_value, dict):
        return isinstance(cluster_value, dict) and set(cluster_value) == set(local_value) and all(
            same(cluster_value[k], local_value[k]) for k in local_value)
    if isinstance(local_value, list):
        return isinstance(cluster_value, list) and len(cluster_value) == len(local_value) and all(
            same(a, b) for a, b in zip(cluster_value, local_value, strict=True))
    if isinstance(local_value, float) and isinstance(cluster_value, float):
        return cluster_value == pytest.approx(local_value, abs=2e-3)  # sums in another order
    return cluster_value == local_value


def test_both_reports_on_a_standalone_cluster_equal_the_local_run(
    cluster: dict[str, Any], stored: dict[str, Any], trace_run: dict[str, Any], heap_run: dict[str, Any]
) -> None:
    for kind, local in (("trace", trace_run), ("heap", heap_run)):
        expected = {k: v for k, v in local["run"].result.items() if k != "seconds"}
        got = {k: v for k, v in run_on(cluster["master"], kind, stored["archive_dir"]).items() if k != "seconds"}
        assert got["groups"], kind
        assert same(got, expected), kind
    # The work ran on the cluster: the master lists both runs as finished applications
    # whose executors had the worker's core.
    apps = master_state(cluster["ui"]).get("completedapps", [])
    assert [a["name"] for a in apps].count("mqcenter-reports") == 2
    assert all(a["cores"] == 1 for a in apps)
