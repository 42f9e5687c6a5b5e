"""Small pure pieces: handler outcome mapping, configuration, extend answers, log format."""

from __future__ import annotations

import json
import logging

import pytest

from mqclient import ClientConfig, ConfigurationError, Message, Reject, Snooze, consumer
from mqclient.consumer import clear_registry, registered_consumers
from mqclient.leases import stale_ids
from mqclient.logs import JsonFormatter
from mqclient.subscription import invoke


def _spec(handler):  # type: ignore[no-untyped-def]
    clear_registry()
    consumer("t")(handler)
    return registered_consumers()[0]


MSG = Message(id=1, topic="t", group="g", data={"x": 1})


def test_a_returning_handler_is_success_and_its_string_is_the_log() -> None:
    assert invoke(_spec(lambda m: "charged"), MSG) == ("SUCCESS", "charged", True, None)
    assert invoke(_spec(lambda m: None), MSG) == ("SUCCESS", "", True, None)


def test_a_raising_handler_fails_with_the_exception_text() -> None:
    def boom(message: Message) -> None:
        raise ValueError("card declined")

    status, log, retry, _ = invoke(_spec(boom), MSG)
    assert (status, retry) == ("FAIL", True)
    assert log.startswith("ValueError: card declined")


def test_reject_fails_without_retry() -> None:
    def reject(message: Message) -> None:
        raise Reject("unknown customer")

    assert invoke(_spec(reject), MSG) == ("FAIL", "rejected: unknown customer", False, None)


def test_snooze_asks_for_a_redelivery_after_its_delay() -> None:
    def later(message: Message) -> None:
        raise Snooze(30, "printer busy")

    assert invoke(_spec(later), MSG) == ("RETRY", "printer busy", True, 30.0)
    with pytest.raises(ValueError):
        Snooze(-1)


def test_an_async_handler_is_awaited() -> None:
    async def handler(message: Message) -> str:
        return f"got {message.data['x']}"

    assert invoke(_spec(handler), MSG) == ("SUCCESS", "got 1", True, None)


def test_the_decorator_validates_and_leaves_the_function_callable() -> None:
    clear_registry()

    @consumer("orders", group="billing", concurrency=8, timeout=5)
    def handler(message: Message) -> str:
        return "ok"

    assert handler(MSG) == "ok"
    spec = registered_consumers()[0]
    assert (spec.topic, spec.group, spec.concurrency, spec.timeout) == ("orders", "billing", 8, 5)
    with pytest.raises(ValueError):
        consumer("bad topic!")
    clear_registry()


def test_config_reads_the_environment_and_arguments_win() -> None:
    env = {
        "MQ_BROKERS": "127.0.0.1:8000, http://b:9/",
        "MQ_TOKEN": "tok",
        "MQ_CONCURRENCY": "8",
        "MQ_WEBSOCKET": "yes",
    }
    config = ClientConfig.from_env(env, concurrency=2)
    assert config.brokers == ["http://127.0.0.1:8000", "http://b:9"]
    assert (config.token, config.concurrency, config.websocket) == ("tok", 2, True)
    with pytest.raises(ConfigurationError):
        ClientConfig.from_env({"MQ_CONCURRENCY": "many"})
    with pytest.raises(ConfigurationError):
        ClientConfig.from_env({}).require_brokers()


def test_stale_extend_answers_are_recognised_in_every_plausible_shape() -> None:
    assert stale_ids(
        {
            "results": [
                {"id": 1, "lease_expires_at": "2030-01-01T00:00:00Z"},
                {"id": 2, "outcome": "stale"},
            ]
        }
    ) == {2}
    assert stale_ids({"results": [{"id": 3, "lease_expires_at": "stale"}]}) == {3}
    assert stale_ids({"leases": {"4": "stale", "5": "2030-01-01T00:00:00Z"}}) == {4}


def test_json_log_lines_carry_the_delivery_fields() -> None:
    record = logging.makeLogRecord(
        {
            "msg": "done",
            "levelname": "INFO",
            "name": "x",
            "id": 7,
            "outcome": "success",
            "duration_ms": 1.5,
        }
    )
    line = json.loads(JsonFormatter().format(record))
    assert (line["id"], line["outcome"], line["msg"]) == (7, "success", "done")


def test_the_sdk_imports_no_django() -> None:
    import subprocess
    import sys

    code = (
        "import sys, mqclient, mqclient.runner, mqclient.cli, mqclient.websocket, "
        "mqclient.batching; print(sorted(m for m in sys.modules if m.split('.')[0] == 'django'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_heartbeat_adopts_the_registry_broker_list() -> None:
    from mqclient.heartbeat import Heartbeat
    from mqclient.transport import Transport
    from tests.mqclient.sdk_fakebroker import FakeBroker

    answer = {
        "subscriptions": [{"topic": "t", "group": "g", "mode": "queue", "rank": 0, "total": 1}],
        "heartbeat_seconds": 7,
        "brokers": ["http://10.9.9.9:8000"],
    }
    broker = FakeBroker(lambda m, p, b: (200, answer))
    try:
        transport = Transport([broker.url])
        beat = Heartbeat(transport, "host:1:ab", [{"topic": "t", "group": "g"}])
        beat.beat()
        assert transport.brokers == ["http://10.9.9.9:8000", broker.url]
        assert beat.interval == 7
        assert broker.requests[0].body == {
            "consumer": "host:1:ab",
            "subscriptions": [{"topic": "t", "group": "g"}],
        }
    finally:
        broker.stop()


def test_run_names_a_missing_module_in_one_line_and_keeps_an_apps_own_import_error(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import subprocess
    import sys

    (tmp_path / "broken_app.py").write_text("import a_package_nobody_installed\n")
    env = {"PATH": "/usr/bin:/bin", "MQ_BROKERS": "http://127.0.0.1:1", "MQ_TOKEN": "t"}

    def run(module: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mqclient", "run", module], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    missing = run("myapp.consumers")
    assert missing.returncode == 2
    assert missing.stderr.strip().splitlines() == [
        "mqclient: no module named 'myapp': run from the directory that holds it, or put it on PYTHONPATH"]
    broken = run("broken_app")  # found, but its own import fails: the app's bug, shown whole
    assert broken.returncode == 1
    assert "Traceback" in broken.stderr and "No module named 'a_package_nobody_installed'" in broken.stderr
