"""The reports' figures computed again with plain SQL over the live and archive tables (in
MariaDB, before the exported history is purged from them): a second, independent truth
beside the simulation's own (world.py).

Percentiles are nearest-rank (the ceil(p * n)-th smallest value), as the reports state.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.db import connection

Query = Callable[[str, list[Any]], list[tuple[Any, ...]]]

COLUMNS = "id, topic, group_name, status, attempt, effect_time, add_time, update_time, lease_owner, pulled_at"
MESSAGES = f"(SELECT {COLUMNS} FROM mq_message UNION ALL SELECT {COLUMNS} FROM mq_message_archive)"
# Every trace event: trace rows, and the "acked" event a first delivery's success leaves on
# its row only (SUCCESS, attempt 1, its pull still on the row, no "acked" row of attempt 1),
# at its update_time.
TRACE = f"""(
  SELECT id, message_id, event, actor, at, attempt, status_after, log FROM mq_message_trace
  UNION ALL SELECT NULL, m.id, 'acked', m.lease_owner, m.update_time, m.attempt, 'SUCCESS', '' FROM {MESSAGES} m
    WHERE m.status = 'SUCCESS' AND m.attempt = 1 AND m.pulled_at IS NOT NULL AND NOT EXISTS (
      SELECT 1 FROM mq_message_trace a WHERE a.message_id = m.id AND a.event = 'acked' AND a.attempt = 1)
)"""
# Every pull: trace rows, and the one message rows hold (a claim's, in the row's attempt).
PULLS = f"""(
  SELECT t.message_id, t.actor, t.at, t.id, t.attempt FROM mq_message_trace t WHERE t.event = 'pulled'
  UNION ALL SELECT m.id, m.lease_owner, m.pulled_at, NULL, m.attempt FROM {MESSAGES} m WHERE m.pulled_at IS NOT NULL
)"""
# Every finished delivery: an ack or nack with its processing time, from the last pull of
# the same message and attempt.
DELIVERIES = f"""(
  SELECT t.message_id, t.actor, TIMESTAMPDIFF(MICROSECOND, MAX(pl.at), t.at) / 1e6 AS v
  FROM {TRACE} t JOIN {PULLS} pl ON pl.message_id = t.message_id AND pl.attempt = t.attempt
  WHERE t.event IN ('acked', 'nacked') GROUP BY t.id, t.message_id, t.actor, t.at
  HAVING MAX(pl.at) <= t.at
)"""
REASON = (
    "CASE WHEN TRIM(SUBSTRING_INDEX(COALESCE(t.log, ''), '\\n', 1)) = '' THEN '(no reason given)' "
    "ELSE LEFT(TRIM(SUBSTRING_INDEX(t.log, '\\n', 1)), 200) END"
)
PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
STATUSES = ("SUCCESS", "FAIL", "TIMEOUT", "EXPIRED", "CANCELLED", "NEW", "RUNNING", "PREPARED")
# Messages produced as half of a transaction: still PREPARED, committed later, or cancelled
# before a commit.
BORN_PREPARED = f"""(SELECT id AS message_id FROM {MESSAGES} p WHERE status = 'PREPARED'
  UNION SELECT message_id FROM mq_message_trace WHERE event = 'committed'
  UNION SELECT message_id FROM mq_message_trace
    WHERE event = 'cancelled' AND log LIKE '%%cancelled while PREPARED, before its commit%%')"""


def rows(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def nearest_rank_sql(
    values: str,
    prefix: str,
    keys: str = "topic, group_name",
    percentiles: tuple[tuple[str, float], ...] = PERCENTILES,
) -> str:
    """Per `keys`, the nearest-rank percentiles of `values` (a query with columns keys, v)."""
    picks = ", ".join(
        f"MAX(CASE WHEN rn = CEIL({f} * n) THEN v END) AS {prefix}_{name}"
        for name, f in percentiles
    )
    return f"""SELECT {keys}, {picks} FROM (
      SELECT {keys}, v, ROW_NUMBER() OVER (PARTITION BY {keys} ORDER BY v) AS rn,
             COUNT(*) OVER (PARTITION BY {keys}) AS n FROM ({values}) AS vals) AS ranked
      GROUP BY {keys}"""


def trace_truth(since: datetime, until: datetime, rows: Query = rows) -> dict[str, Any]:
    window = "m.add_time >= %s AND m.add_time < %s"
    p = [since, until]
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    counted = ", ".join(f"SUM(status = '{s}')" for s in STATUSES)
    for topic, group, n, *by_status, avg, top, retried in rows(
        f"""
        SELECT topic, group_name, COUNT(*), {counted}, AVG(attempt), MAX(attempt), SUM(attempt > 1)
        FROM {MESSAGES} m WHERE {window} GROUP BY topic, group_name""",
        p,
    ):
        groups[(topic, group)] = {
            "messages": n,
            **{s.lower(): int(k) for s, k in zip(STATUSES, by_status, strict=True)},
            "attempts_avg": float(avg),
            "attempts_max": top,
            "retried": int(retried),
            "lease_expiries": 0,
        }
    for topic, group, n in rows(
        f"""
        SELECT m.topic, m.group_name, COUNT(*) FROM {TRACE} t JOIN {MESSAGES} m ON m.id = t.message_id
        WHERE {window} AND t.event = 'lease_expired' GROUP BY m.topic, m.group_name""",
        p,
    ):
        groups[(topic, group)]["lease_expiries"] = n
    latency = f"""SELECT m.topic, m.group_name,
        TIMESTAMPDIFF(MICROSECOND, m.add_time, MAX(t.at)) / 1e6 AS v
        FROM {MESSAGES} m JOIN {TRACE} t ON t.message_id = m.id AND t.event = 'acked'
        WHERE {window} AND m.status = 'SUCCESS' GROUP BY m.id, m.topic, m.group_name, m.add_time"""
    for topic, group, *values in rows(nearest_rank_sql(latency, "latency"), p):
        groups[(topic, group)].update(
            {f"latency_{name}": float(v) for (name, _), v in zip(PERCENTILES, values, strict=True)}
        )
    processing = f"""SELECT m.topic, m.group_name, d.v FROM {DELIVERIES} d JOIN {MESSAGES} m ON m.id = d.message_id
        WHERE {window}"""
    for topic, group, *values in rows(nearest_rank_sql(processing, "processing"), p):
        groups[(topic, group)].update(
            {
                f"processing_{name}": float(v)
                for (name, _), v in zip(PERCENTILES, values, strict=True)
            }
        )
    attempts = {
        (t, g, a): n
        for t, g, a, n in rows(
            f"SELECT topic, group_name, attempt, COUNT(*) FROM {MESSAGES} m WHERE {window} "
            "GROUP BY topic, group_name, attempt",
            p,
        )
    }
    consumers: dict[tuple[str, str, str], dict[str, Any]] = {}

    def add(sql: str, name: str) -> None:
        for topic, group, actor, n in rows(sql, p):
            consumers.setdefault(
                (topic, group, actor),
                {"deliveries": 0, "released": 0, "acked": 0, "nacked": 0, "expired": 0},
            )[name] = n

    add(
        f"""SELECT m.topic, m.group_name, pl.actor, COUNT(*) FROM {PULLS} pl JOIN {MESSAGES} m ON m.id = pl.message_id
            WHERE {window} GROUP BY m.topic, m.group_name, pl.actor""",
        "deliveries",
    )
    for event in ("released", "acked", "nacked"):
        add(
            f"""SELECT m.topic, m.group_name, t.actor, COUNT(*) FROM {TRACE} t
                JOIN {MESSAGES} m ON m.id = t.message_id WHERE {window} AND t.event = '{event}'
                GROUP BY m.topic, m.group_name, t.actor""",
            event,
        )
    add(
        f"""SELECT topic, group_name, holder, COUNT(*) FROM (
              SELECT m.topic, m.group_name, (SELECT pl.actor FROM {PULLS} pl WHERE pl.message_id = t.message_id
                     AND pl.at <= t.at ORDER BY pl.at DESC, COALESCE(pl.id, 1e18) DESC LIMIT 1) AS holder
              FROM {TRACE} t JOIN {MESSAGES} m ON m.id = t.message_id
              WHERE {window} AND t.event = 'lease_expired') AS expiries GROUP BY topic, group_name, holder""",
        "expired",
    )
    for item in consumers.values():
        item["attempts"] = item["deliveries"] - item["released"]
        ended = item["acked"] + item["nacked"] + item["expired"]
        item["failure_rate"] = (item["nacked"] + item["expired"]) / ended if ended else None
        item["processing_p50"] = None
    per_consumer = f"""SELECT m.topic, m.group_name, d.actor, d.v FROM {DELIVERIES} d
        JOIN {MESSAGES} m ON m.id = d.message_id WHERE {window}"""
    for topic, group, actor, value in rows(
        nearest_rank_sql(per_consumer, "processing", "topic, group_name, actor", PERCENTILES[:1]), p
    ):
        consumers[(topic, group, actor)]["processing_p50"] = float(value)
    reasons: dict[tuple[str, str], list[tuple[str, int]]] = {}
    for topic, group, reason, n in rows(
        f"""
        SELECT topic, group_name, reason, n FROM (
          SELECT topic, group_name, reason, n, ROW_NUMBER() OVER (PARTITION BY topic, group_name
                 ORDER BY n DESC, reason) AS rk FROM (
            SELECT m.topic, m.group_name, {REASON} AS reason, COUNT(*) AS n FROM {TRACE} t
            JOIN {MESSAGES} m ON m.id = t.message_id WHERE {window} AND t.event = 'nacked'
            GROUP BY 1, 2, 3) AS counted) AS ranked
        WHERE rk <= 5 ORDER BY topic, group_name, rk""",
        p,
    ):
        reasons.setdefault((topic, group), []).append((reason, n))
    return {"groups": groups, "attempts": attempts, "consumers": consumers, "reasons": reasons}


def heap_flow_truth(
    since: datetime, until: datetime, rows: Query = rows
) -> dict[tuple[str, str, datetime], list[int]]:
    """Inflow and outflow per topic, group and hour of [since, until): in when produced
    (unless PREPARED) or when an event leaves it NEW/RUNNING after a status that was not;
    out when an event leaves it in any other status after NEW/RUNNING."""
    hour = "TIMESTAMP(DATE_FORMAT({0}, '%%Y-%%m-%%d %%H:00:00'))"
    flow: dict[tuple[str, str, datetime], list[int]] = {}
    produced = f"""SELECT topic, group_name, {hour.format("add_time")}, COUNT(*) FROM {MESSAGES} m
        WHERE add_time >= %s AND add_time < %s AND id NOT IN {BORN_PREPARED} GROUP BY 1, 2, 3"""
    changes = f"""SELECT m.topic, m.group_name, {hour.format("e.at")}, e.status_after IN ('NEW', 'RUNNING'), COUNT(*)
        FROM (SELECT t.message_id, t.at, t.status_after, COALESCE(LAG(t.status_after) OVER (
                PARTITION BY t.message_id ORDER BY t.at, t.id), IF(b.message_id IS NULL, 'NEW', 'PREPARED')) AS before_
              FROM {TRACE} t LEFT JOIN {BORN_PREPARED} b ON b.message_id = t.message_id) e
        JOIN {MESSAGES} m ON m.id = e.message_id
        WHERE (e.status_after IN ('NEW', 'RUNNING')) <> (e.before_ IN ('NEW', 'RUNNING'))
          AND e.at >= %s AND e.at < %s GROUP BY 1, 2, 3, 4"""
    for topic, group, at, n in rows(produced, [since, until]):
        flow.setdefault((topic, group, at), [0, 0])[0] += n
    for topic, group, at, entered, n in rows(changes, [since, until]):
        flow.setdefault((topic, group, at), [0, 0])[0 if entered else 1] += n
    return flow


def heap_state_truth(until: datetime, rows: Query = rows) -> dict[tuple[str, str], dict[str, Any]]:
    """Backlog, delayed, running and oldest waiting age as of `until`, per topic and group:
    each message's status after its last event before `until` (the row's own when nothing
    changed it since), its effect time the one that event set."""
    # The due time a retry or an expired lease ("retry at <time>") or a snooze ("snoozed
    # until <time>: ...") logs.
    retry_at = "REGEXP_REPLACE(l.log, '^.*(retry at|snoozed until) ([0-9T:.-]+).*$', '\\\\2')"
    parsed = (
        f"CASE WHEN SUBSTRING({retry_at}, 20, 1) = '.' "
        f"THEN STR_TO_DATE(LEFT({retry_at}, 26), '%%Y-%%m-%%dT%%H:%%i:%%s.%%f') "
        f"ELSE STR_TO_DATE(LEFT({retry_at}, 19), '%%Y-%%m-%%dT%%H:%%i:%%s') END"
    )
    events = f"""(SELECT message_id, id, event, at, status_after, log FROM {TRACE} tr
      UNION ALL SELECT m.id, NULL, 'pulled', m.pulled_at, 'RUNNING', '' FROM {MESSAGES} m WHERE m.pulled_at IS NOT NULL)"""
    sql = f"""
      SELECT m.topic, m.group_name,
        CASE WHEN later.message_id IS NULL THEN m.status
             WHEN l.status_after IS NULL AND m.id IN {BORN_PREPARED} THEN 'PREPARED'
             WHEN l.status_after IS NULL THEN 'NEW' ELSE l.status_after END AS state,
        CASE WHEN later.message_id IS NULL THEN m.effect_time
             WHEN l.event IN ('retry_scheduled', 'lease_expired') THEN COALESCE({parsed}, l.at)
             WHEN l.event IN ('released', 'redriven') THEN l.at
             WHEN later.effect_changed = 0 THEN m.effect_time
             ELSE COALESCE(l.at, m.add_time) END AS effect
      FROM {MESSAGES} m
      LEFT JOIN (SELECT * FROM (SELECT e.*, ROW_NUMBER() OVER (PARTITION BY message_id
                   ORDER BY at DESC, COALESCE(id, 1e18) DESC) AS rn FROM {events} e WHERE at < %s) x
                 WHERE rn = 1) l ON l.message_id = m.id
      LEFT JOIN (SELECT message_id, MAX(event IN ('retry_scheduled', 'lease_expired', 'released', 'redriven',
                   'edited')) AS effect_changed FROM {events} e WHERE at >= %s GROUP BY message_id) later
                ON later.message_id = m.id
      WHERE m.add_time < %s"""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for topic, group, state, effect in rows(sql, [until, until, until]):
        item = groups.setdefault(
            (topic, group), {"backlog": 0, "delayed": 0, "running": 0, "oldest": None}
        )
        if state == "NEW" and effect <= until:
            item["backlog"] += 1
            item["oldest"] = effect if item["oldest"] is None else min(item["oldest"], effect)
        elif state == "NEW":
            item["delayed"] += 1
        elif state == "RUNNING":
            item["running"] += 1
    for item in groups.values():
        oldest = item.pop("oldest")
        item["oldest_age_seconds"] = (until - oldest).total_seconds() if oldest else None
    return groups
