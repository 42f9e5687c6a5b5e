"""The OpenAPI document is the contract: a schema-driven fuzzer (Schemathesis) runs every
operation of the live `/api/schema/` against a real broker process on its own MariaDB
database, with all its checks, stateful sequences along the document's `links` included.

It fails on any 5xx and on any disagreement between document and server: a request the
document allows that the server refuses, or one it forbids that the server accepts; a status
code, content type, header or body the document does not list; an operation that ignores
authentication; a resource still there after its deletion or gone after its creation. Every
4xx carries the API.md error body (the document's only error schema). tests/security/
contract_hooks.py keeps generated times inside rules JSON Schema cannot state (the clock).

Figures: MQ_SCHEMATHESIS_EXAMPLES (default 3) examples per operation in the coverage and
fuzzing phases, MQ_SCHEMATHESIS_SCENARIOS (default 30) stateful scenarios; raise them for a
deeper, slower run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

EXAMPLES = int(os.environ.get("MQ_SCHEMATHESIS_EXAMPLES", "3"))
SCENARIOS = int(os.environ.get("MQ_SCHEMATHESIS_SCENARIOS", "30"))
REDIS_DB_URL = "redis://127.0.0.1:6379/12"  # this suite's own Redis database
CALLABLE_HOST = "localhost:9"


@pytest.fixture(scope="module")
def live_broker() -> Any:
    server = BrokerServer("schemathesis", extra_env={
        "REDIS_URL": REDIS_DB_URL, "CELERY_BROKER_URL": REDIS_DB_URL,
        # Transactions and webhooks on (no Celery worker runs: nothing is ever called).
        "MQ_TRANSACTION_CHECK_HOSTS": CALLABLE_HOST, "MQ_ALARM_WEBHOOK_HOSTS": CALLABLE_HOST,
    })
    server.setup()
    try:
        url = server.start()
        _seed(server, url)
        yield server, url
    finally:
        server.teardown()


def _seed(server: BrokerServer, url: str) -> None:
    """Some data for the generated requests to find: a topic with groups, messages, a consumer."""
    with server.client(url) as admin:
        assert admin.post("/api/v1/topics", json={
            "topic": "orders", "retry_count": 1,
            "groups": [{"group": "billing", "mode": "queue"}, {"group": "audit", "mode": "serial"}],
        }).status_code == 201
        response = admin.post("/api/v1/messages", json={"messages": [
            {"topic": "orders", "data": {"n": i}, "key": f"k{i % 3}"} for i in range(20)]})
        assert response.status_code == 201
        assert admin.post("/api/v1/registry/consumers", json={
            "consumer": "seed:1:x", "subscriptions": [{"topic": "orders"}]}).status_code == 200
        assert admin.post("/api/v1/pull", json={"topic": "orders", "consumer": "seed:1:x",
                                                "max_messages": 5}).status_code == 200


def _error_body_check_module(tmp: Path) -> None:
    """The API.md error body on every 4xx/5xx, as a Schemathesis check the CLI loads."""
    (tmp / "contract_checks.py").write_text(
        "import json\n"
        "import schemathesis\n"
        "from tests.security import contract_hooks  # noqa: F401  (registers the hooks)\n\n"
        "@schemathesis.check\n"
        "def api_md_error_body(ctx, response, case):\n"
        "    if response.status_code < 400:\n"
        "        return None\n"
        "    body = json.loads(response.content)\n"
        "    assert set(body) == {'error'}, body\n"
        "    assert set(body['error']) == {'code', 'message', 'details'}, body\n"
        "    assert isinstance(body['error']['code'], str) and isinstance(body['error']['details'], dict), body\n"
        "    return True\n"
    )


def _run(server: BrokerServer, url: str, tmp: Path, *args: str) -> str:
    _error_body_check_module(tmp)
    env = {**os.environ, "SCHEMATHESIS_HOOKS": "contract_checks", "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", "schemathesis.cli", "run", f"{url}/api/schema/?format=json",
         "-H", f"Authorization: Bearer {server.token}", "--checks", "all",
         # Slow answers on a loaded test machine are not the contract's business.
         "--max-response-time", "120", "--request-timeout", "60", "--no-color", "--warnings", "off", *args],
        cwd=tmp, env=env, capture_output=True, text=True, timeout=900, check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-20000:]
    assert "No issues found" in output, output[-20000:]
    return output


def test_every_operation_keeps_the_contract_for_generated_requests(live_broker: Any, tmp_path: Path) -> None:
    server, url = live_broker
    # One worker: CPython 3.11's parser is not safe for the generator's threads.
    output = _run(server, url, tmp_path, "--phases", "examples,coverage,fuzzing",
                  "--max-examples", str(EXAMPLES), "-w", "1")
    paths = httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).json()["paths"]
    count = sum(1 for item in paths.values() for method in item if method in ("get", "post", "patch", "delete"))
    assert f"Operations:       {count} selected / {count} total" in output, output[:3000]


def test_stateful_sequences_follow_the_links_and_keep_the_contract(live_broker: Any, tmp_path: Path) -> None:
    server, url = live_broker
    output = _run(server, url, tmp_path, "--phases", "stateful", "--max-examples", str(SCENARIOS), "-w", "1")
    assert "Stateful" in output


def test_it_serves_the_same_document_live(live_broker: Any) -> None:
    from django.test import override_settings
    from drf_spectacular.generators import SchemaGenerator

    _, url = live_broker
    live = httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).json()
    with override_settings(MQ_TRANSACTION_CHECK_HOSTS=[CALLABLE_HOST], MQ_ALARM_WEBHOOK_HOSTS=[CALLABLE_HOST]):
        built = json.loads(json.dumps(SchemaGenerator().get_schema(request=None, public=True), default=str))
    assert live["paths"] == built["paths"]
    assert live["components"] == built["components"]


def test_the_document_links_creations_and_pulls_to_the_operations_taking_their_ids(live_broker: Any) -> None:
    _, url = live_broker
    paths = httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).json()["paths"]
    links = {(path, method, status): set(answer.get("links", {}))
             for path, item in paths.items() for method, op in item.items() if isinstance(op, dict)
             for status, answer in op.get("responses", {}).items()}
    assert {"MessageDetail", "TransactionCommit", "TransactionRollback"} <= links[("/api/v1/messages", "post", "201")]
    assert {"Ack", "Extend", "Release"} <= links[("/api/v1/pull", "post", "200")]
    assert {"TopicDetail", "GroupCreate"} <= links[("/api/v1/topics", "post", "201")]
    assert {"GroupDetail", "GroupDelete"} <= links[("/api/v1/topics/{topic}/groups", "post", "201")]
    assert {"ScheduleRun", "ScheduleDelete"} <= links[("/api/v1/schedules", "post", "201")]
