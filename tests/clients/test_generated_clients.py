"""Clients generated from the live OpenAPI document, proven against a real broker: a typed
Python client (openapi-python-client) and a TypeScript one (openapi-typescript types with
openapi-fetch, compiled by tsc against them and run by Node, examples/typescript). Each
produces, pulls with a long-poll wait, acks and reads the message's trace."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import ROOT, BrokerServer

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

TYPESCRIPT = ROOT / "examples" / "typescript"
PYTHON_SCRIPT = Path(__file__).with_name("generated_python_client.py")
VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Any:
    server = BrokerServer("generated_clients")
    server.setup()
    try:
        url = server.start()
        schema = tmp_path_factory.mktemp("schema") / "openapi.json"
        schema.write_text(httpx.get(f"{url}/api/schema/", params={"format": "json"}, timeout=30).text)
        yield server, url, schema
    finally:
        server.teardown()


def _saw(output: str, server: BrokerServer, lang: str) -> None:
    seen = json.loads(output.strip().splitlines()[-1])
    assert seen["pulled"] == [seen["produced"]], seen
    assert seen["data"] == [{"order": 42, "lang": lang}]
    assert seen["outcomes"] == ["success"]
    assert seen["status"] == "SUCCESS"
    assert seen["trace"] == ["produced", "pulled", "acked"]
    [(status,)] = server.sql("SELECT status FROM mq_message WHERE id = %s", seen["produced"])
    assert status == "SUCCESS"


def test_a_python_client_generated_from_the_document_produces_pulls_acks_and_traces(
    broker: Any, tmp_path: Path
) -> None:
    server, url, schema = broker
    config = tmp_path / "config.yml"
    # Literal enums: the time zones' names (GMT+0, GMT-0, GMT0) make no distinct identifiers.
    config.write_text("literal_enums: true\n")
    package = tmp_path / "pkg" / "mqcenter_client"
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    generated = subprocess.run(
        [str(VENV_BIN / "openapi-python-client"), "generate", "--path", str(schema), "--output-path", str(package),
         "--meta", "none", "--config", str(config)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert generated.returncode == 0, generated.stdout + generated.stderr
    assert "Warning" not in generated.stdout + generated.stderr, generated.stdout + generated.stderr
    done = subprocess.run(
        [sys.executable, str(PYTHON_SCRIPT), url, server.token, "orders.python"],
        env={**env, "PYTHONPATH": str(package.parent)}, capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    _saw(done.stdout, server, "python")


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: Node.js 18 or later with npm"
    return path


def test_a_typescript_client_generated_from_the_document_runs_on_node(broker: Any, tmp_path: Path) -> None:
    server, url, schema = broker
    work = tmp_path / "ts"
    work.mkdir()
    for name in ("package.json", "package-lock.json", "tsconfig.json", "client.ts"):
        shutil.copy(TYPESCRIPT / name, work / name)
    npm = _tool("npm")

    def run(*command: str, timeout: int = 300, **env: str) -> str:
        done = subprocess.run(list(command), cwd=work, env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=timeout, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    # The locked versions (package-lock.json), from npm's cache when it has them.
    run(npm, "ci", "--no-audit", "--no-fund", "--prefer-offline")
    run(npm, "run", "generate", MQ_SCHEMA=str(schema))
    run(npm, "run", "build")  # tsc: the client type-checks against the generated types
    output = run(_tool("node"), "build/client.js", MQ_BASE=url, MQ_TOKEN=server.token, MQ_TOPIC="orders.typescript")
    _saw(output, server, "typescript")
