"""The monitoring kit in docs/monitoring/ is checked, not just shipped: the alert rules pass
`promtool check rules` and their unit tests (`promtool test rules`, one test per alert), and
the Grafana dashboard and the rules name only series that /metrics exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

MONITORING = Path(__file__).resolve().parents[2] / "docs" / "monitoring"
RULES = MONITORING / "alerts.yml"
RULE_TESTS = MONITORING / "alerts_test.yml"
DASHBOARD = MONITORING / "grafana-dashboard.json"
# Every series of MQ Center is named mq_*; PromQL functions, labels and keywords are not.
SERIES = re.compile(r"\b(mq_[a-z0-9_]+)\b")
SUFFIXES = {"counter": ("_total", "_created"), "histogram": ("_bucket", "_sum", "_count", "_created"),
            "summary": ("_sum", "_count", "_created"), "gauge": ("",), "untyped": ("",), "info": ("_info",)}


def promtool() -> str:
    path = shutil.which("promtool")
    assert path, "promtool is missing: apt-get install prometheus (scripts/test.sh installs it)"
    return path


def _alerts() -> list[dict]:
    return [rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]]


def test_the_alert_rules_pass_promtool_check() -> None:
    done = subprocess.run([promtool(), "check", "rules", str(RULES)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in done.stdout


def test_the_alert_rules_pass_their_unit_tests() -> None:
    done = subprocess.run([promtool(), "test", "rules", str(RULE_TESTS)], capture_output=True, text=True,
                          timeout=120, check=False, cwd=MONITORING)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_has_a_unit_test_that_fires_it_and_one_that_does_not() -> None:
    firing: set[str] = set()
    silent: set[str] = set()
    for case in yaml.safe_load(RULE_TESTS.read_text())["tests"]:
        for check in case.get("alert_rule_test", []):
            (firing if check.get("exp_alerts") else silent).add(check["alertname"])
    names = {rule["alert"] for rule in _alerts()}
    assert names == firing, names ^ firing
    assert names == silent, names ^ silent


def _dashboard_queries() -> list[str]:
    queries: list[str] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("expr", "query") and isinstance(value, str):
                    queries.append(value)
                elif key == "query" and isinstance(value, dict) and isinstance(value.get("query"), str):
                    queries.append(value["query"])  # a templating variable's query
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(json.loads(DASHBOARD.read_text()))
    return queries


def _exported(body: str) -> set[str]:
    """The series names a Prometheus text exposition holds, from its # TYPE lines (a family
    with no sample yet, such as a gauge of a group without a snapshot, still counts)."""
    names: set[str] = set()
    for match in re.finditer(r"^# TYPE (\S+) (\S+)$", body, re.M):
        family, kind = match.groups()
        names.add(family)  # a counter's family is written with its _total
        names.update(family.removesuffix("_total") + suffix for suffix in SUFFIXES.get(kind, ("",)))
    return names


@pytest.mark.django_db
def test_the_dashboard_and_the_rules_name_only_series_that_metrics_exports(admin_api) -> None:
    response = admin_api.get("/metrics")
    assert response.status_code == 200
    exported = _exported(response.content.decode())
    queries = _dashboard_queries()
    assert len(queries) >= 10
    dashboard = {name for query in queries for name in SERIES.findall(query)}
    rules = {name for rule in _alerts() for name in SERIES.findall(rule["expr"])}
    assert dashboard and rules
    assert dashboard - exported == set()
    assert rules - exported == set()
