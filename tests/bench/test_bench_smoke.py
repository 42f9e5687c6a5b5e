"""The benchmark suite's machinery at toy sizes, so it does not rot between full runs.

Real services throughout: a broker process on its own database (`mq_e2e_bench_smoke`), SDK
consumer processes, MariaDB through plain mysqlclient. Asserts what the bench would report
on (every message stored, every message handled once) and that the report is written;
never how fast anything was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from bench import dblimit, indexes, load, report
from bench.common import ROOT, BenchBroker, mysql_connect, summary

pytestmark = pytest.mark.e2e


def test_it_measures_the_database_limit_without_losing_rows() -> None:
    database = dblimit.scratch_database("bench_smoke_dblimit")  # not the bench's own database
    try:
        assert dblimit.insert_rate(database, 400) > 0
        # claim_ack_rate raises if any row was lost or claimed twice
        cpu: dict[str, float] = {}
        assert dblimit.claim_ack_rate(database, 400, traces=True, cpu=cpu) > 0
        # where its CPU went: the server's part and the 4 client processes'
        assert set(cpu) == {"mariadb", "clients"} and min(cpu.values()) > 0
        idle = dblimit.idle_round_trips(database, 5, gap=0.001)
        assert set(idle) == {"select_p50_ms", "insert_commit_p50_ms"} and min(idle.values()) > 0
        conn = mysql_connect(database)
        cursor = conn.cursor()
        cursor.execute("SELECT COUNT(*) FROM mq_message WHERE topic = 'bench-idle-probe'")
        assert cursor.fetchone()[0] == 0  # the probe's rows are gone
        conn.close()
    finally:
        BenchBroker("bench_smoke_dblimit").teardown()


@pytest.fixture
def broker():  # type: ignore[no-untyped-def]
    server = BenchBroker("bench_smoke", serving="uvicorn1")
    server.setup()
    server.start()
    yield server
    server.teardown()


def test_it_produces_over_http_and_drains_with_sdk_consumer_processes(broker: BenchBroker) -> None:
    load.ensure_topic(broker, "smoke")
    assert load.produce_rate(broker, "smoke", 400) > 0
    assert broker.sql("SELECT COUNT(*) FROM mq_message WHERE topic='smoke' AND status='NEW'")[0][0] == 400

    broker.truncate()
    assert load.sdk_e2e_rate(broker, "smoke", 600, processes=2) > 0
    # the consumers stop gracefully (acks flushed) before the rate is returned
    by_status = dict(broker.sql("SELECT status, COUNT(*) FROM mq_message GROUP BY status"))
    assert by_status == {"SUCCESS": 600}
    assert broker.rss_mb() > 10


def test_it_writes_the_table_and_charts(tmp_path) -> None:  # type: ignore[no-untyped-def]
    data = {"figures": {
        "mq_produce": summary([900, 1000, 1100]),
        "mq_e2e": {**summary([2000, 2100, 2200]), "cpu_us_per_message": {
            "broker": summary([50, 50, 50]), "mariadb": summary([120, 130, 140])}},
        "dblimit_claim_ack": {**summary([3000, 3100, 3200]), "cpu_us_per_message": {
            "mariadb": summary([125, 125, 125]), "clients": summary([20, 20, 20])}},
        # the broker's trace work too: the like-for-like split for end to end
        "dblimit_claim_ack_with_traces": {**summary([2900, 3000, 3100]), "cpu_us_per_message": {
            "mariadb": summary([128, 128, 128]), "clients": summary([21, 21, 21])}},
        "dblimit_insert": {**summary([3000, 3000, 3000]), "cpu_us_per_message": {
            "mariadb": summary([30, 30, 30]), "clients": summary([25, 25, 25])}},
        "celery_e2e": summary([500, 600, 700]),
        "mq_latency": {"p50": summary([5, 6, 7]), "p99": summary([20, 30, 40]),
                       "idle_db": {"insert_commit_p50_ms": summary([0.9, 1.0, 1.1]),
                                   "select_p50_ms": summary([0.3, 0.3, 0.3])}},
        "celery_latency": {"p50": summary([4, 4, 4]), "p99": summary([9, 9, 9])},
        "soak": {"seconds": 600, "target_rate": 1500, "capacity": {"offered_rate": 3100, "handled_per_s": 3000},
                 "rss_growth_mb": 2.0, "p99_median_ms": 50, "p99_worst_ms": 200, "error_responses": 0,
                 "memory_flat": True, "p99_stable": False, "zero_errors": True, "windows": []},
    }}
    (tmp_path / "results.json").write_text(json.dumps(data))
    report.write(data, tmp_path)

    table = (tmp_path / "results.md").read_text()
    assert "| produce throughput, msg/s | 1,000 (900-1,100) |" in table
    produce_row = next(line for line in table.splitlines() if line.startswith("| produce throughput"))
    assert produce_row.endswith("**missed** |")  # 1,000 is below half of 3,000
    e2e_row = next(line for line in table.splitlines() if line.startswith("| end-to-end"))
    assert e2e_row.endswith("**met** |")
    # the broker's CPU split beside its database limit's
    assert ("| broker 50 (50-50); mariadb 130 (120-140) | DB limit + traces: mariadb 128 (128-128), clients 21"
            " (21-21); 2 cores = 2,000,000 µs/s | info |") in table
    assert "| — | DB limit: mariadb 30 (30-30), clients 25 (25-25); 2 cores = 2,000,000 µs/s | info |" in table
    latency_row = next(line for line in table.splitlines() if line.startswith("| delivery latency p50"))
    assert latency_row.endswith("**missed** |")  # 6 ms is not below Celery's 4 ms
    assert "| one-row INSERT, committed 1.00 (0.90-1.10); SELECT 1 0.30 (0.30-0.30) |" in table
    soak_row = next(line for line in table.splitlines() if line.startswith("| soak"))
    assert soak_row.startswith("| soak 600 s at 1500 msg/s |")
    assert "maximum with producers and consumers 3,000 msg/s handled while 3,100 were offered" in soak_row
    assert soak_row.endswith("**missed** |")  # worst window p99 200 ms is above 3x the median 50 ms
    assert (tmp_path / "throughput_e2e.png").stat().st_size > 1000
    assert (tmp_path / "latency.png").stat().st_size > 1000


def test_the_handlers_count_reaches_redis_from_threads_and_forked_workers() -> None:
    """Every system's no-op handler counts this way (Celery and django-q2 fork their
    workers after importing it, and django-q2 ends them every 500 tasks): a count lost or
    doubled would end a drain early or never."""
    import multiprocessing
    import threading
    import time

    from bench.common import REDIS_URL, redis_client
    from bench.workloads.counter import HandledCounter

    counter = HandledCounter(REDIS_URL)
    client = redis_client()
    client.delete("bench:done:smoke-count")
    counter.add("smoke-count")  # the parent counts first, as a handler module imported before a fork may

    def handle(n: int) -> None:
        for _ in range(n):
            counter.add("smoke-count")

    threads = [threading.Thread(target=handle, args=(500,)) for _ in range(4)]
    # It exits right after its tasks, as django-q2's workers do after 500.
    worker = multiprocessing.get_context("fork").Process(target=handle, args=(300,))
    worker.start()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    worker.join()
    deadline = time.monotonic() + 5
    while int(client.get("bench:done:smoke-count") or 0) < 2301 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.05)  # a count flushed twice would show up after the total
    assert int(client.get("bench:done:smoke-count") or 0) == 2301


def test_the_long_poll_figure_waits_for_the_pulls_of_every_broker_process(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The figure runs on the default serving (two processes): it must see all the pulls
    waiting, those of both processes, before it produces (else it times out after 12 s and
    measures pulls still arriving), and every pull is then served. It runs on a table in
    service: the history put there first is finished work, which no pull may be given."""
    from bench import figures
    from bench.common import SCALES, Results

    broker = BenchBroker("bench_smoke_lp")  # the default serving
    broker.setup()
    broker.start()
    try:
        assert broker.serving.workers == 2
        load.ensure_topic(broker, "lp")
        load.put_history(broker, "lp", 300)
        client, waiting = figures.waiting_pulls(broker, "lp", 20)
        assert waiting == 20
        with httpx.Client(base_url=broker.url, headers=broker.headers(), timeout=30) as http:
            http.post("/api/v1/messages", json={"messages": [{"topic": "lp", "data": {"t0": 0}}] * 20}
                      ).raise_for_status()
        out, _ = client.communicate(timeout=60)
        answers = json.loads(out.strip().splitlines()[-1])
        assert sorted(a["status"] for a in answers) == [200] * 20
        assert sum(a["messages"] for a in answers) == 20
        # One message to each pull, wherever it waited.
        assert len(broker.sql("SELECT DISTINCT lease_owner FROM mq_message WHERE lease_owner LIKE 'lp-%%'")) == 20
        # The history is as it was put: finished, never leased.
        assert broker.sql("SELECT status, COUNT(*), COUNT(lease_owner), COUNT(pulled_at) FROM mq_message"
                          " WHERE producer = 'bench' GROUP BY status") == [("SUCCESS", 300, 0, 0)]
    finally:
        broker.teardown()

    results = Results(path=tmp_path / "results.json")
    figures.longpoll(SCALES["toy"], results)
    lp = results.data["figures"]["mq_longpoll"]
    assert lp["serving"] == broker.serving.label
    assert lp["served"]["min"] == lp["one_process"]["served"]["min"] == 20
    assert lp["errors"]["max"] == lp["one_process"]["errors"]["max"] == 0
    report.write(results.data, tmp_path)
    assert "the same burst on one broker process | served 20 (20-20), errors 0 (0-0)" in (tmp_path / "results.md").read_text()


def test_statements_per_message_counts_a_steady_drain_at_one_commit_per_pull() -> None:
    """`python -m bench.statements` (what `bench.ab` compares between trees): the database's
    own counters; a drain whose pulls carry the acks of the batch before commits once per
    pull (2 full pulls of 100, then the last, empty one that carries the last acks)."""
    done = subprocess.run([sys.executable, "-m", "bench.statements", "--messages", "200"], cwd=ROOT,
                          env={**os.environ, "MQ_BENCH_ID": f"smoke_{os.getpid()}"},
                          capture_output=True, text=True, timeout=300, check=False)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")] or [done.stderr[-2000:]]
    figures = json.loads(line.removeprefix("RESULT "))
    assert set(figures) == {"produce", "pull_ack", "idle_produce_pull_ack"}
    assert round(figures["pull_ack"]["Com_commit"] * 200) == 3
    assert round(figures["produce"]["Com_commit"] * 200) == 2  # one per batch of 100


WITHOUT_FAIR = "DROP INDEX ix_msg_fair ON mq_message"


def test_the_index_variants_alter_the_table_and_are_measured_alike(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MQ_BENCH_ID", "smoke")

    def status_indexes(database: str) -> set[str]:
        conn = mysql_connect(database)
        cursor = conn.cursor()
        cursor.execute("SELECT DISTINCT index_name FROM information_schema.statistics WHERE table_schema = %s"
                       " AND table_name = 'mq_message' AND column_name = 'status'", [database])
        names = {row[0] for row in cursor.fetchall()}
        conn.close()
        return names

    try:
        migrated = status_indexes(indexes.variant_database("migrations", ""))
        merged = status_indexes(indexes.variant_database("merged", WITHOUT_FAIR))
    finally:
        for name in ("migrations", "merged"):
            BenchBroker(indexes.scratch_name(name)).teardown()
    # a claim or an ack of a message without a key or an expiry rewrites these (ix_msg_key and
    # ix_msg_expiry hold a generated status instead: migration 0011)
    assert migrated == {"ix_msg_priority", "ix_msg_order", "ix_msg_fair", "ix_msg_status", "ix_msg_finished"}
    assert merged == migrated - {"ix_msg_fair"}
    figures = indexes.main(400, 1, {"merged": WITHOUT_FAIR})
    assert set(figures) == {"migrations", "merged"}
    assert figures["migrations"]["claim_ack_ratio"] == 1.0
    assert all(f["insert_msg_s"] > 0 and f["claim_ack_msg_s"] > 0 and f["redo_bytes_per_msg"] > 0 for f in figures.values())
