"""Both reports over traffic made through a real broker, every figure checked against the
same figure computed with plain SQL over its live and archive tables.

The traffic (`broker_traffic`) runs through a `runbroker` process, an SDK consumer process
and an HTTP consumer. The real cleanup job then archives one topic and exports it to Parquet;
the SQL truth is taken; a second cleanup archives another topic and purges the first, so the
reports read live rows, archived rows and rows only in Parquet.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.spark import sql_truth
from tests.spark.broker_traffic import cleanup, make_traffic
from tests.support.server import BrokerServer

pytestmark = [pytest.mark.spark, pytest.mark.e2e, pytest.mark.timeout(600)]

THRESHOLDS = {"orders": 1000, "audit": 5}


def close(actual: Any, expected: Any) -> bool:
    if expected is None or actual is None:
        return actual is expected
    return actual == pytest.approx(expected, abs=2e-3)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("broker-figures")
    archive = tmp / "archive"
    server = BrokerServer(
        "reports",
        extra_env={
            "MQ_LEASE_GRACE_SECONDS": "0",
            "MQ_LEASE_RECOVERY_SECONDS": "0.2",
            "MQ_TRANSACTION_CHECK_HOSTS": "127.0.0.1:*",
        },
    )
    try:
        server.setup()
        url = server.start()
        traffic = make_traffic(server, url, tmp)
        server.stop()
        # Retention: mail 1 day, orders 7, audit 30. A day on, mail is archived and exported
        # (and kept in the archive table: the archive keeps 30 days).
        first = cleanup(
            server, archive, 1, MQ_ARCHIVE_EXPORT_SETTLE_SECONDS="0", MQ_ARCHIVE_RETENTION_DAYS="30"
        )

        def query(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
            return server.sql(sql, *params)

        since, until = traffic["since"], traffic["until"]
        truth = {
            "trace": sql_truth.trace_truth(since, until, query),
            "flow": sql_truth.heap_flow_truth(since, until, query),
            "state": sql_truth.heap_state_truth(until, query),
        }
        # Eight days on, orders is archived (not exported: the export waits an hour), and
        # mail, exported, is purged from the database (the archive keeps a day): only
        # Parquet holds it.
        second = cleanup(
            server,
            archive,
            8,
            MQ_ARCHIVE_EXPORT_SETTLE_SECONDS="3600",
            MQ_ARCHIVE_RETENTION_DAYS="1",
        )
        yield {
            "server": server,
            "archive": archive,
            "truth": truth,
            "cleanups": [first, second],
            **traffic,
        }
    finally:
        server.teardown()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture(scope="module")
def reports(broker: dict[str, Any], spark_local: Any) -> dict[str, dict[str, Any]]:
    from spark.extract import JdbcSource
    from spark.jobs import ReportConfig, run_heap_report, run_trace_report

    archive: Path = broker["archive"]
    config = ReportConfig(
        source=JdbcSource(
            url=f"jdbc:mariadb://127.0.0.1:3306/{broker['server'].database}",
            user="root",
            partitions=2,
        ),
        since=broker["since"],
        until=broker["until"],
        thresholds=THRESHOLDS,
        archive_messages=str(archive / "messages"),
        archive_traces=str(archive / "traces"),
    )
    return {"trace": run_trace_report(config), "heap": run_heap_report(config)}


def test_the_traffic_has_every_case_and_all_three_sources(broker: dict[str, Any]) -> None:
    server: BrokerServer = broker["server"]
    first, second = broker["cleanups"]
    assert (
        first["archived"] > 0
        and first["exported"]["messages"] == first["archived"]
        and first["purged"] == 0
    )
    assert (
        second["archived"] > 0
        and second["exported"]["messages"] == 0
        and second["purged"] == first["archived"]
    )
    # live (audit, orders' unfinished), archive table (orders), Parquet only (mail)
    assert {t for (t,) in server.sql("SELECT DISTINCT topic FROM mq_message")} == {
        "audit",
        "orders",
    }
    assert {t for (t,) in server.sql("SELECT DISTINCT topic FROM mq_message_archive")} == {"orders"}
    assert list(broker["archive"].glob("messages/day=*/topic=mail/*.parquet"))
    trace = broker["truth"]["trace"]
    groups = trace["groups"]
    assert (
        groups[("orders", "default")]["fail"] == 2
        and groups[("orders", "default")]["attempts_max"] == 3
    )
    assert (
        groups[("orders", "billing")]["lease_expiries"] == 2
        and groups[("mail", "urgent")]["timeout"] == 2
    )
    assert len({r for items in trace["reasons"].values() for r, _ in items}) >= 5
    assert {c for (_t, _g, c) in trace["consumers"]} >= {"ops-http@host-b"} and len(
        {c for (t, g, c) in trace["consumers"] if (t, g) == ("orders", "default")}
    ) == 2
    state = broker["truth"]["state"][("audit", "default")]
    assert (state["backlog"], state["delayed"], state["running"]) == (8, 6, 3)
    audit = groups[("audit", "default")]
    assert (audit["cancelled"], audit["prepared"], audit["new"]) == (2, 1, 16)
    assert (
        broker["truth"]["flow"]
        and sum(v[1] for (t, _g, _h), v in broker["truth"]["flow"].items() if t == "audit") == 2
    )  # the cancels


def test_the_trace_report_matches_sql(reports: dict[str, Any], broker: dict[str, Any]) -> None:
    truth, report = broker["truth"]["trace"], reports["trace"]
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    assert set(got) == set(truth["groups"])
    for key, expected in truth["groups"].items():
        for name, value in expected.items():
            assert close(got[key][name], value), (key, name, got[key][name], value)
    assert report["messages"] == sum(g["messages"] for g in truth["groups"].values())
    assert {
        (a["topic"], a["group"], a["attempt"]): a["messages"] for a in report["attempts"]
    } == truth["attempts"]
    reasons: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for row in report["reasons"]:
        reasons.setdefault((row["topic"], row["group"]), []).append(
            (row["reason"], row["failures"])
        )
    assert reasons == truth["reasons"]
    consumers = {(c["topic"], c["group"], c["consumer"]): c for c in report["consumers"]}
    assert set(consumers) == set(truth["consumers"])
    for key, expected in truth["consumers"].items():
        for name, value in expected.items():
            assert close(consumers[key][name], value), (key, name, consumers[key][name], value)


def test_the_heap_report_matches_sql(reports: dict[str, Any], broker: dict[str, Any]) -> None:
    report, flow, state = reports["heap"], broker["truth"]["flow"], broker["truth"]["state"]
    hourly: dict[tuple[str, str, datetime], list[int]] = {}
    for series in report["hourly"]:
        for point in series["hours"]:
            if point["inflow"] or point["outflow"]:
                hourly[
                    (series["topic"], series["group"], datetime.fromisoformat(point["hour"]))
                ] = [point["inflow"], point["outflow"]]
    assert hourly == flow
    got = {(g["topic"], g["group"]): g for g in report["groups"]}
    keys = {k for k, v in state.items() if v["backlog"] or v["delayed"] or v["running"]} | {
        (t, g) for (t, g, _h) in flow
    }
    assert set(got) == keys
    for key in keys:
        expected = {
            **{"backlog": 0, "delayed": 0, "running": 0, "oldest_age_seconds": None},
            **state.get(key, {}),
        }
        points = [v for (t, g, _h), v in flow.items() if (t, g) == key]
        inflow, outflow, active = sum(v[0] for v in points), sum(v[1] for v in points), len(points)
        # Rates per active hour (an hour of the window with any flow in the group).
        in_rate, out_rate = (inflow / active, outflow / active) if active else (0.0, 0.0)
        growth, band = in_rate - out_rate, max(in_rate, out_rate) * 0.01
        expected.update(
            inflow=inflow,
            outflow=outflow,
            active_hours=active,
            inflow_per_hour=in_rate,
            outflow_per_hour=out_rate,
            growth_per_hour=growth,
            trend="growing" if growth > band else "shrinking" if growth < -band else "steady",
            drain_hours=0.0
            if expected["backlog"] == 0
            else (expected["backlog"] / -growth if growth < 0 else None),
        )
        for name, value in expected.items():
            assert (
                close(got[key][name], value)
                if not isinstance(value, str)
                else got[key][name] == value
            ), (key, name, got[key][name], value)
    alarms = [(a["topic"], a["group"], a["backlog"], a["threshold"]) for a in report["alarms"]]
    assert alarms == [("audit", "default", 8, 5)]


def test_the_heap_is_as_of_until_though_the_traffic_went_on(
    reports: dict[str, Any], broker: dict[str, Any]
) -> None:
    server: BrokerServer = broker["server"]
    held = broker["held"][0]
    [(status, update_time)] = server.sql(
        "SELECT status, update_time FROM mq_message WHERE id = %s", held
    )
    assert status == "SUCCESS" and update_time >= broker["until"]  # acked after the window
    audit = {(g["topic"], g["group"]): g for g in reports["heap"]["groups"]}[("audit", "default")]
    # produced in the window, PREPARED until a commit after it: not waiting at `until`
    assert (audit["backlog"], audit["delayed"], audit["running"]) == (8, 6, 3)
