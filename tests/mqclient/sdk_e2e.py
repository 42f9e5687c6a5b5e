"""Harness for the SDK's end-to-end tests: a dedicated MariaDB database, real broker processes
(``manage.py runbroker``) and real consumer processes (``python -m mqclient run``).

Everything runs on 127.0.0.1. Processes are started with their output in files under the test's
tmp dir (printed on failure) and are always stopped, killed if need be, when the test ends.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from mqclient import Producer
from tests.support.server import ROOT, BrokerServer, free_port, wait_for_healthz

HERE = Path(__file__).resolve().parent
PYTHON = sys.executable
REDIS_URL = os.environ.get("MQ_E2E_REDIS_URL", "redis://127.0.0.1:6379/9")

# Short server timings so lease expiry and registry changes happen within a test's budget.
SERVER_ENV = {
    "MQ_LEASE_GRACE_SECONDS": "2",
    "MQ_HEARTBEAT_SECONDS": "3",
    "DJANGO_DEBUG": "0",
    "REDIS_URL": REDIS_URL,
    "PYTHONUNBUFFERED": "1",
}


def wait_until(condition: Callable[[], Any], timeout: float, what: str, step: float = 0.1) -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test with ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(step)


@dataclass
class Process:
    """A child process with its combined output in ``log``."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, signum: int) -> None:
        if self.alive():
            self.popen.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.popen.wait(timeout)

    def stop(self, timeout: float = 15.0) -> None:
        if not self.alive():
            return
        self.popen.send_signal(signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait(5)

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""


def spawn(name: str, args: list[str], env: dict[str, str], workdir: Path) -> Process:
    log = workdir / f"{name}.log"
    handle = log.open("wb")
    popen = subprocess.Popen(args, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT)
    handle.close()
    return Process(name, popen, log)


@dataclass
class Cluster:
    """The dedicated database (a `BrokerServer`'s, `mq_e2e_sdk_<pid>`) plus the broker and
    consumer processes a test starts, each with its output in a file of `workdir`."""

    workdir: Path
    server: BrokerServer = field(default_factory=lambda: BrokerServer("sdk", extra_env=SERVER_ENV))
    processes: list[Process] = field(default_factory=list)

    @property
    def token(self) -> str:
        return self.server.token

    def prepare_database(self) -> None:
        self.server.setup()

    def drop_database(self) -> None:
        self.server.teardown()

    def start_broker(self, port: int | None = None) -> Broker:
        port = port or free_port()
        proc = spawn(f"broker-{port}", self.server.command(port), self.server.process_env(port), self.workdir)
        self.processes.append(proc)
        broker = Broker(f"http://127.0.0.1:{port}", proc)
        wait_for_healthz(broker.url, proc.popen, output=proc.output)
        return broker

    def start_consumer(
        self, name: str, brokers: list[str], events: Path, **settings: Any
    ) -> Process:
        """``python -m mqclient run sdk_e2e_consumers`` configured through E2E_* variables."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MQ_", "E2E_"))}
        env.update(
            {
                "MQ_BROKERS": ",".join(brokers),
                "MQ_TOKEN": self.token,
                "MQ_WAIT_SECONDS": "3",
                "MQ_LOG_FORMAT": "json",
                "E2E_EVENTS": str(events),
                "PYTHONPATH": os.pathsep.join([str(HERE), str(ROOT)]),
                "PYTHONUNBUFFERED": "1",
            }
        )
        for key, value in settings.items():
            prefix = "" if key.startswith("MQ_") else "E2E_"
            env[prefix + key.upper()] = str(value)
        proc = spawn(
            name, [PYTHON, "-m", "mqclient", "run", "sdk_e2e_consumers"], env, self.workdir
        )
        self.processes.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in reversed(self.processes):
            proc.stop()

    def logs(self) -> str:
        return "\n".join(f"===== {p.name} =====\n{p.output()[-4000:]}" for p in self.processes)


@dataclass
class Broker:
    url: str
    process: Process


class Admin:
    """Admin-token calls used to set up and observe a test (never the SDK under test)."""

    def __init__(self, broker_urls: Callable[[], list[str]], token: str) -> None:
        self.broker_urls = broker_urls
        self.client = httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=10)

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        last: Exception | None = None
        for url in self.broker_urls():
            try:
                response = self.client.request(method, url + path, **kwargs)
            except httpx.TransportError as exc:
                last = exc
                continue
            assert response.status_code < 300, (
                f"{method} {path}: {response.status_code} {response.text}"
            )
            return response.json() if response.content else None
        raise AssertionError(f"no broker answered {method} {path}: {last}")

    def create_topic(self, topic: str, **settings: Any) -> None:
        self.request("POST", "/api/v1/topics", json={"topic": topic, **settings})

    def messages(self, topic: str, **filters: Any) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        cursor = None
        while True:
            params = {"topic": topic, **filters}
            if cursor:
                params["cursor"] = cursor
            page = self.request("GET", "/api/v1/messages", params=params)
            found.extend(page["messages"])
            cursor = page.get("next_cursor")
            if not cursor:
                return found

    def message(self, message_id: int) -> dict[str, Any]:
        return self.request("GET", f"/api/v1/messages/{message_id}")

    def brokers(self) -> list[str]:
        return [b["url"] for b in self.request("GET", "/api/v1/registry/brokers")]

    def consumers(self, topic: str) -> list[dict[str, Any]]:
        return self.request("GET", "/api/v1/registry/consumers", params={"topic": topic})


def read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def max_overlap(events: list[dict[str, Any]]) -> int:
    """Most handlers running at the same moment, from start/end events."""
    points = sorted(
        (e["t"], 1 if e["event"] == "start" else -1)
        for e in events
        if e["event"] in {"start", "end"}
    )
    running = peak = 0
    for _, delta in points:
        running += delta
        peak = max(peak, running)
    return peak


def statuses(messages: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for message in messages:
        counts[message["status"]] = counts.get(message["status"], 0) + 1
    return counts


def iter_trace(detail: dict[str, Any], event: str) -> Iterator[dict[str, Any]]:
    return (item for item in detail["trace"] if item["event"] == event)


@dataclass
class Scenario:
    """One test's topic, events file, brokers and consumer processes."""

    cluster: Cluster
    topic: str
    events: Path
    brokers: list[str]
    consumers: list[Process] = field(default_factory=list)

    @property
    def admin(self) -> Admin:
        return Admin(lambda: self.brokers, self.cluster.token)

    def consumer(self, name: str, *, brokers: list[str] | None = None, **settings: Any) -> Process:
        settings.setdefault("topic", self.topic)
        proc = self.cluster.start_consumer(
            f"{name}-{uuid.uuid4().hex[:4]}", brokers or self.brokers, self.events, **settings
        )
        self.consumers.append(proc)
        return proc

    def producer(self, **options: Any) -> Producer:
        return Producer(self.brokers, self.cluster.token, **options)
