"""Subscriptions through the SDK, end to end against real broker processes: a publish's receipt
lists every copy, ``mqclient groups ...`` manages groups, a consumer with ``start="earliest"``
receives the topic's history and then the stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from mqclient import Admin, NotFound
from mqclient.admin import ensure_group
from tests.mqclient.sdk_e2e import Scenario, read_events, spawn, statuses, wait_until
from tests.support.server import ROOT

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]


def _subscribe(scenario: Scenario, *groups: str) -> None:
    scenario.admin.create_topic(scenario.topic)
    for group in groups:
        scenario.admin.request(
            "POST", f"/api/v1/topics/{scenario.topic}/groups", json={"group": group}
        )


def _cli(scenario: Scenario, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m mqclient groups ...`` in its own process, configured like an operator's shell."""
    return _mqclient(scenario, "groups", *args)


def _mqclient(scenario: Scenario, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    env.update({"MQ_BROKERS": ",".join(scenario.brokers), "MQ_TOKEN": scenario.cluster.token})
    return subprocess.run(
        [sys.executable, "-m", "mqclient", *args],
        input=stdin,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _ok(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def _refused(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    [line] = result.stderr.strip().splitlines()  # one clear line, no traceback
    assert line.startswith("mqclient: ")
    return line


def test_it_lists_every_copy_of_a_publish_in_its_receipt(scenario: Scenario) -> None:
    _subscribe(scenario, "billing", "audit")
    other = f"{scenario.topic}.other"  # no group subscribed: its publishes stay in `default`
    with scenario.producer() as producer:
        receipt = producer.produce(scenario.topic, {"n": 1}, key="k1")
        direct = producer.produce(scenario.topic, {"n": 2}, group="billing")
        mixed = producer.produce_many(
            [
                {"topic": scenario.topic, "data": {"n": 3}},
                {"topic": scenario.topic, "data": {"n": 4}, "group": "audit"},
                {"topic": other, "data": {"n": 5}},
                {"topic": scenario.topic, "data": {"n": 6}},
            ]
        )
        with producer.batching(linger=0.2) as batch:
            futures = [
                batch.submit(scenario.topic, {"n": 7}),
                batch.submit(scenario.topic, {"n": 8}, group="billing"),
                batch.submit(scenario.topic, {"n": 9}),
            ]
            batched = [future.result(timeout=30) for future in futures]
        copies = producer.broadcast(scenario.topic, {"n": 10})

    assert sorted(receipt.groups) == ["audit", "billing"]
    assert len(set(receipt.ids)) == 2 and receipt.id == receipt.ids[0]
    assert [c.id for c in receipt.copies] == receipt.ids
    assert (direct.ids, direct.groups) == ([direct.id], ["billing"])
    assert [sorted(r.groups) for r in mixed] == [
        ["audit", "billing"],
        ["audit"],
        ["default"],
        ["audit", "billing"],
    ]
    assert [sorted(r.groups) for r in batched] == [
        ["audit", "billing"],
        ["billing"],
        ["audit", "billing"],
    ]
    assert sorted(c.group for c in copies) == ["audit", "billing"]

    # Every id a receipt names is the stored message with that item's data, in its group.
    stored = {m["id"]: m for m in scenario.admin.messages(scenario.topic)}
    stored.update({m["id"]: m for m in scenario.admin.messages(other)})
    everything = [receipt, direct, *mixed, *batched]
    for n, item in enumerate(everything, start=1):
        for copy in item.copies:
            assert (stored[copy.id]["data"], stored[copy.id]["group"]) == ({"n": n}, copy.group)
    named = sum(len(item.ids) for item in everything) + len(copies)
    assert len(stored) == named == 2 + 1 + 2 + 1 + 1 + 2 + 2 + 1 + 2 + 2


def test_it_manages_groups_with_the_command_line(scenario: Scenario) -> None:
    _subscribe(scenario)
    topic = scenario.topic
    created = _ok(_cli(scenario, "create", topic, "audit", "--max-in-flight", "5"))
    assert (created["group"], created["max_in_flight"], created["paused"]) == ("audit", 5, False)
    with scenario.producer() as producer:
        ids = [producer.produce(topic, {"n": n}).id for n in range(3)]
    assert _ok(_cli(scenario, "show", topic, "audit"))["backlog"] == 3

    table = _cli(scenario, "list", topic)
    assert table.returncode == 0, table.stderr
    header, *rows = table.stdout.splitlines()
    assert header.split()[:4] == ["GROUP", "MODE", "PAUSED", "BACKLOG"]
    assert [row.split()[:4] for row in rows] == [["audit", "queue", "False", "3"]]
    assert [g["group"] for g in _ok(_cli(scenario, "list", topic, "--json"))] == ["audit"]

    assert _ok(_cli(scenario, "pause", topic, "audit"))["paused"] is True
    assert scenario.admin.request("GET", f"/api/v1/topics/{topic}/groups/audit")["paused"] is True
    assert _ok(_cli(scenario, "resume", topic, "audit"))["paused"] is False
    changed = _ok(_cli(scenario, "set", topic, "audit", "--rate", "50", "--max-in-flight", "none"))
    assert (changed["rate_per_second"], changed["max_in_flight"]) == (50, None)
    assert _ok(_cli(scenario, "set", topic, "audit", "--fair-keys", "on"))["fair_keys"] is True

    since = (datetime.now(UTC) - timedelta(minutes=5)).isoformat()
    _ok(_cli(scenario, "replay", topic, "audit", "--since", since))
    replayed = [m for m in scenario.admin.messages(topic, group="audit") if m["id"] not in ids]
    assert sorted(m["data"]["n"] for m in replayed) == [0, 1, 2]
    assert _ok(_cli(scenario, "show", topic, "audit"))["backlog"] == 6

    # Refusals: one line naming the problem, exit status 2, nothing changed.
    assert "already exists" in _refused(_cli(scenario, "create", topic, "audit"))
    assert _ok(_cli(scenario, "create", topic, "audit", "--exist-ok"))["backlog"] == 6
    tomorrow = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert "field start" in _refused(_cli(scenario, "create", topic, "later", "--start", tomorrow))
    assert "start must be" in _refused(_cli(scenario, "create", topic, "later", "--start", "soon"))
    assert "field rate_per_second" in _refused(_cli(scenario, "set", topic, "audit", "--rate", "0"))
    assert "not_found" in _refused(_cli(scenario, "show", topic, "nobody"))
    assert "not_found" in _refused(_cli(scenario, "pause", f"{topic}.missing", "audit"))
    assert "--yes" in _refused(_cli(scenario, "delete", topic, "audit"))
    assert [g["group"] for g in _ok(_cli(scenario, "list", topic, "--json"))] == ["audit"]

    assert _ok(_cli(scenario, "delete", topic, "audit", "--yes"))["deleted"] is True
    assert _ok(_cli(scenario, "list", topic, "--json")) == []
    assert "not_found" in _refused(_cli(scenario, "show", topic, "audit"))
    assert scenario.admin.messages(topic, group="audit", status="NEW") == []


def test_it_produces_from_the_command_line(scenario: Scenario) -> None:
    _subscribe(scenario, "billing")
    topic = scenario.topic
    sent = _mqclient(scenario, "produce", topic, '{"id": 7}', "--header", "source=cli=1")
    assert sent.returncode == 0, sent.stderr
    [copy] = [json.loads(line) for line in sent.stdout.splitlines()]
    word = _mqclient(scenario, "produce", topic, "--group", "billing", stdin="hello\n")
    assert word.returncode == 0, word.stderr
    stored = {m["id"]: m for m in scenario.admin.messages(topic)}
    assert (stored[copy["id"]]["data"], stored[copy["id"]]["headers"]) == ({"id": 7}, {"source": "cli=1"})
    assert [m["data"] for m in stored.values() if m["id"] != copy["id"]] == ["hello"]

    # Refused before anything is sent: JSON with a typo, a header without a name or "=".
    assert "data is not valid JSON" in _refused(_mqclient(scenario, "produce", topic, "{id: 7}"))
    assert "data is not valid JSON" in _refused(_mqclient(scenario, "produce", topic, '["a",]'))
    assert "no data given" in _refused(_mqclient(scenario, "produce", topic, stdin=""))
    for header in ("source", "=cli"):
        bad = _mqclient(scenario, "produce", topic, "{}", "--header", header)
        assert bad.returncode == 2 and "is not NAME=VALUE" in bad.stderr and "Traceback" not in bad.stderr
    assert len(scenario.admin.messages(topic)) == 2


def test_it_creates_a_missing_topic_and_its_group_from_start_only_once(scenario: Scenario) -> None:
    with Admin(scenario.brokers, scenario.cluster.token) as admin:
        with pytest.raises(NotFound):
            admin.groups.list(scenario.topic)
        created = ensure_group(admin.groups, scenario.topic, "history", "earliest")
        assert created is not None and created["group"] == "history"
        with scenario.producer() as producer:
            producer.produce(scenario.topic, {"n": 1})
        # The group exists: nothing is replayed a second time.
        assert ensure_group(admin.groups, scenario.topic, "history", "earliest") is None
        assert admin.groups.get(scenario.topic, "history")["backlog"] == 1


def test_it_delivers_the_history_and_the_stream_to_a_consumer_started_from_earliest(
    scenario: Scenario,
) -> None:
    _subscribe(scenario, "billing")
    with scenario.producer() as producer:
        for n in range(5):
            producer.produce(scenario.topic, {"n": n})

        scenario.consumer("history", groups="history", start="earliest")
        scenario.consumer("fresh", groups="fresh")  # no start: created by registration, latest
        wait_until(
            lambda: (
                {c["group"] for c in scenario.admin.consumers(scenario.topic)}
                >= {"history", "fresh"}
            ),
            30,
            "both consumers to register",
        )
        for n in range(5, 8):
            receipt = producer.produce(scenario.topic, {"n": n})
            assert sorted(receipt.groups) == ["billing", "fresh", "history"]

    def received(group: str) -> Counter[int]:
        ends = [e for e in read_events(scenario.events) if e["event"] == "end"]
        return Counter(e["data"]["n"] for e in ends if e["group"] == group)

    wait_until(lambda: sum(received("history").values()) >= 8, 60, "history to get 8 messages")
    wait_until(lambda: sum(received("fresh").values()) >= 3, 60, "fresh to get 3 messages")
    wait_until(
        lambda: all(
            m["status"] == "SUCCESS"
            for m in scenario.admin.messages(scenario.topic)
            if m["group"] != "billing"
        ),
        30,
        "every delivered copy acked",
    )
    assert received("history") == Counter(
        range(8)
    )  # the history, then the stream: no gap, no double
    assert received("fresh") == Counter(range(5, 8))
    replayed = [
        m for m in scenario.admin.messages(scenario.topic, group="history") if m["data"]["n"] < 5
    ]
    assert len(replayed) == 5 and all("mq-replay-of" in m["headers"] for m in replayed)


def test_it_runs_the_example_app_with_every_order_published_to_both_groups(
    scenario: Scenario,
) -> None:
    """examples/README.md, as a user runs it: the consumers, then the producer."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MQ_")}
    env.update(
        {
            "MQ_BROKERS": ",".join(scenario.brokers),
            "MQ_TOKEN": scenario.cluster.token,
            "MQ_WAIT_SECONDS": "3",
            "PYTHONUNBUFFERED": "1",
        }
    )
    command = [sys.executable, "-m", "mqclient", "run", "examples.consumers"]
    scenario.consumers.append(spawn("examples", command, env, scenario.cluster.workdir))
    wait_until(
        lambda: {c["group"] for c in scenario.admin.consumers("orders")} == {"billing", "audit"},
        30,
        "the example's two groups to register",
    )
    produced = subprocess.run(
        [sys.executable, "-m", "examples.producer", "5"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    first = produced.stdout.splitlines()[0]
    assert (
        first.startswith("order 1 stored for each group")
        and "billing" in first
        and "audit" in first
    )
    assert "batched 5 orders: 10 copies stored" in produced.stdout

    wait_until(
        lambda: statuses(scenario.admin.messages("orders")) == {"SUCCESS": 13},
        60,
        "13 copies acked",
    )
    delivered = Counter((m["group"], m["data"]["id"]) for m in scenario.admin.messages("orders"))
    publishes = [1, 100, 101, 102, 103, 104]
    assert delivered == Counter(
        [(g, n) for g in ("billing", "audit") for n in publishes] + [("billing", 2)]
    )


def test_it_exits_without_consuming_when_its_start_group_cannot_be_created(
    scenario: Scenario,
) -> None:
    _subscribe(scenario, "billing")
    consume_only = scenario.cluster.server.manage(
        "createtoken", "--scope", f"consume:{scenario.topic}"
    ).strip()
    proc = scenario.consumer("denied", groups="history", start="earliest", MQ_TOKEN=consume_only)
    assert proc.wait(60) == 2
    assert "could not create group history" in proc.output()
    groups = scenario.admin.request("GET", f"/api/v1/topics/{scenario.topic}/groups")
    assert [g["group"] for g in groups] == ["billing"]  # not created from latest by a pull
    assert scenario.admin.consumers(scenario.topic) == []
