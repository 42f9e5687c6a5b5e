"""Fixtures for the SDK's tests: a fake broker for the unit tests (see sdk_fakebroker.py);
the real-server fixtures live in sdk_e2e.py and are used by test_sdk_e2e_*.py."""

from __future__ import annotations

import re
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mqclient.sdk_e2e import Broker, Cluster, Scenario
from tests.mqclient.sdk_fakebroker import FakeBroker, FakeQueue
from tests.support.server import ROOT


@pytest.fixture
def fake_queue() -> FakeQueue:
    return FakeQueue()


@pytest.fixture
def queue_broker(fake_queue: FakeQueue) -> Iterator[FakeBroker]:
    broker = FakeBroker(fake_queue.reply)
    yield broker
    broker.stop()


# --------------------------------------------------------------------------- end to end


@pytest.fixture(scope="session")
def e2e_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A dedicated database (``mq_e2e_sdk_<pid>``), migrated, with an admin token; dropped after."""
    if not (ROOT / "manage.py").exists():
        pytest.skip("the broker server (manage.py) is not in this tree")
    cluster = Cluster(tmp_path_factory.mktemp("e2e-sdk"))
    cluster.prepare_database()
    yield cluster
    cluster.stop_all()
    cluster.drop_database()


@pytest.fixture(scope="session")
def shared_brokers(e2e_cluster: Cluster) -> list[Broker]:
    """Two broker processes on the shared database, for tests that do not kill brokers."""
    return [e2e_cluster.start_broker(), e2e_cluster.start_broker()]


@pytest.fixture
def scenario(
    e2e_cluster: Cluster,
    shared_brokers: list[Broker],
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> Iterator[Scenario]:
    name = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name.removeprefix("test_"))[:60]
    run = Scenario(
        cluster=e2e_cluster,
        topic=f"e2e.{name}.{uuid.uuid4().hex[:6]}",
        events=tmp_path / "events.jsonl",
        brokers=[b.url for b in shared_brokers],
    )
    yield run
    for proc in run.consumers:  # stop them together: each may finish a poll first
        proc.signal(signal.SIGTERM)
    for proc in run.consumers:
        proc.stop()
    # Shown by pytest only when the test failed.
    for proc in run.consumers:
        print(f"===== {proc.name} (exit {proc.popen.returncode}) =====\n{proc.output()[-6000:]}")
