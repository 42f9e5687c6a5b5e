"""A small generated message history with a known truth, for the Spark report tests.

`generate()` simulates message lives (pulls by consumers, acks, nacks with reasons, retries,
lease expiries, dead letters, backlog) as plain Python dicts. The tests store them in MariaDB
(live table, archive table, Parquet export) and compute every figure again from these dicts.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

UNTIL = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
SINCE = UNTIL - timedelta(hours=6)
GROUPS = [("orders", "default"), ("orders", "billing"), ("mail", "default"), ("2024", "x")]
CONSUMERS = ["c1@host-a", "c2@host-b", "c3@host-c"]
REASONS = [
    "db timeout",
    "db timeout\nTraceback (most recent call last): ...",
    "  upstream 503  ",
    "",
    "x" * 300,
    "bad payload: <script>alert(1)</script>",
]


@dataclass
class World:
    messages: list[dict[str, Any]] = field(default_factory=list)
    traces: list[dict[str, Any]] = field(default_factory=list)

    def traces_of(self, ids: set[int]) -> list[dict[str, Any]]:
        return [t for t in self.traces if t["message_id"] in ids]


def generate(seed: int = 7, count: int = 420) -> World:
    rng = random.Random(seed)
    world = World()
    trace_id = 0
    for mid in range(1, count + 1):
        topic, group = GROUPS[mid % len(GROUPS)]
        add_time = SINCE - timedelta(hours=3) + timedelta(seconds=rng.uniform(0, 10 * 3600))
        events: list[dict[str, Any]] = []

        def event(name: str, actor: str, at: datetime, attempt: int, status: str, log: str = "",
                  _events: list[dict[str, Any]] = events, _mid: int = mid, in_row: bool = False) -> None:
            _events.append({"message_id": _mid, "event": name, "actor": actor, "at": at,
                            "attempt": attempt, "status_after": status, "log": log, "in_row": in_row})

        event("produced", "producer", add_time, 0, "NEW", in_row=True)  # held by the row (`producer`)
        t, attempt, status, effect = add_time, 0, "NEW", add_time
        deliveries = rng.choice([0, 1, 1, 1, 2, 2, 3])
        if deliveries == 0:
            effect = add_time + rng.choice([timedelta(0), timedelta(0), timedelta(hours=4)])
        # The pull of the last delivery a claim made is held by the row too (`pulled_at`, by
        # its lease_owner); a later claim writes the earlier one out as a trace row.
        claimed_pull: dict[str, Any] | None = None
        for i in range(deliveries):
            t += timedelta(seconds=rng.uniform(0.5, 900))
            attempt += 1
            consumer = rng.choice(CONSUMERS)
            event("pulled", consumer, t, attempt, "RUNNING")
            claimed_pull = events[-1]
            done = t + timedelta(seconds=round(rng.uniform(0.01, 30), 6))
            fate = rng.choice(["nack", "nack", "expire"]) if i < deliveries - 1 else rng.choice(
                ["ack", "ack", "ack", "ack", "dead", "timeout", "running", "pending"])
            if fate in ("nack", "pending", "dead"):
                event("nacked", consumer, done, attempt, "NEW" if fate != "dead" else "FAIL", rng.choice(REASONS))
                if fate == "dead":
                    event("dead", consumer, done, attempt, "FAIL", "no retries left")
                    status = "FAIL"
                else:
                    delay = timedelta(seconds=rng.choice([5, 60, 5 * 3600]))
                    effect = done + delay
                    event("retry_scheduled", consumer, done, attempt, "NEW", "retry")
                    status = "NEW"
            elif fate == "expire":
                event("lease_expired", "broker", done + timedelta(seconds=60), attempt, "NEW", "lease expired")
                done += timedelta(seconds=60)
                effect, status = done, "NEW"
            elif fate == "timeout":
                event("lease_expired", "broker", done + timedelta(seconds=60), attempt, "TIMEOUT", "lease expired")
                done += timedelta(seconds=60)
                status = "TIMEOUT"
            elif fate == "ack":
                event("acked", consumer, done, attempt, "SUCCESS", "ok")
                status = "SUCCESS"
            else:  # running: pulled, no answer yet
                status = "RUNNING"
            t = done
        if claimed_pull is not None:
            claimed_pull["in_row"] = True
        for e in events:
            trace_id += 1
            e["id"] = trace_id
        world.traces.extend(events)
        world.messages.append({
            "id": mid, "topic": topic, "group_name": group, "status": status, "attempt": attempt,
            "effect_time": effect, "add_time": add_time, "update_time": max(e["at"] for e in events),
            "producer": "producer",
            "lease_owner": claimed_pull["actor"] if claimed_pull else None,
            "pulled_at": claimed_pull["at"] if claimed_pull else None,
        })
    return world


# --- the truth, computed in plain Python --------------------------------------------------


def nearest_rank(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(fraction * len(ordered)) - 1)]


def seconds(later: datetime, earlier: datetime) -> float:
    return (later - earlier).total_seconds()


def reason(log: str) -> str:
    first = log.split("\n", 1)[0].strip()
    return first[:200] if first else "(no reason given)"


def expected_trace(world: World, since: datetime, until: datetime) -> dict[str, Any]:
    msgs = [m for m in world.messages if since <= m["add_time"] < until]
    ids = {m["id"] for m in msgs}
    key_of = {m["id"]: (m["topic"], m["group_name"]) for m in msgs}
    events = world.traces_of(ids)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for key in sorted(set(key_of.values())):
        mine = [m for m in msgs if (m["topic"], m["group_name"]) == key]
        mine_ids = {m["id"] for m in mine}
        ev = [e for e in events if e["message_id"] in mine_ids]
        acked = {}
        for e in ev:
            if e["event"] == "acked":
                acked[e["message_id"]] = max(acked.get(e["message_id"], e["at"]), e["at"])
        latency = [seconds(acked[m["id"]], m["add_time"]) for m in mine if m["status"] == "SUCCESS"]
        processing = [d["processing"] for d in deliveries(ev)]
        row = {
            "messages": len(mine),
            **{s.lower(): sum(1 for m in mine if m["status"] == s)
               for s in ("SUCCESS", "FAIL", "TIMEOUT", "NEW", "RUNNING")},
            "attempts_avg": sum(m["attempt"] for m in mine) / len(mine),
            "attempts_max": max(m["attempt"] for m in mine),
            "retried": sum(1 for m in mine if m["attempt"] > 1),
            "lease_expiries": sum(1 for e in ev if e["event"] == "lease_expired"),
        }
        for name, fraction in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99)):
            row[f"latency_{name}"] = nearest_rank(latency, fraction)
            row[f"processing_{name}"] = nearest_rank(processing, fraction)
        groups[key] = row
    attempts = Counter((m["topic"], m["group_name"], m["attempt"]) for m in msgs)
    reasons: dict[tuple[str, str], list[tuple[str, int]]] = {}
    counted = Counter((key_of[e["message_id"]], reason(e["log"])) for e in events if e["event"] == "nacked")
    by_key: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    for (key, text), n in counted.items():
        by_key[key].append((text, n))
    for key, items in by_key.items():
        reasons[key] = sorted(items, key=lambda item: (-item[1], item[0]))[:5]
    consumers: dict[tuple[str, str, str], dict[str, Any]] = {}
    for e in events:
        if e["event"] in ("pulled", "acked", "nacked"):
            key = (*key_of[e["message_id"]], e["actor"])
            row = consumers.setdefault(key, {"deliveries": 0, "acked": 0, "nacked": 0})
            row["deliveries" if e["event"] == "pulled" else e["event"]] += 1
    for key, row in consumers.items():
        finished = row["acked"] + row["nacked"]
        row["failure_rate"] = row["nacked"] / finished if finished else None
        mine = [d["processing"] for d in deliveries(events)
                if (*key_of[d["message_id"]], d["actor"]) == key]
        row["processing_p50"] = nearest_rank(mine, 0.5)
    return {"groups": groups, "attempts": dict(attempts), "reasons": reasons, "consumers": consumers,
            "messages": len(msgs)}


def deliveries(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    pulled: dict[tuple[int, int], datetime] = {}
    for e in events:
        if e["event"] == "pulled":
            k = (e["message_id"], e["attempt"])
            pulled[k] = max(pulled.get(k, e["at"]), e["at"])
    out = []
    for e in events:
        if e["event"] in ("acked", "nacked"):
            at = pulled.get((e["message_id"], e["attempt"]))
            if at is not None and at <= e["at"]:
                out.append({"message_id": e["message_id"], "actor": e["actor"],
                            "processing": seconds(e["at"], at)})
    return out


def expected_heap(world: World, since: datetime, until: datetime, thresholds: dict[str, int]) -> dict[str, Any]:
    hours = (until - since).total_seconds() / 3600
    relevant = [m for m in world.messages
                if m["status"] in ("NEW", "RUNNING") or m["add_time"] >= since or m["update_time"] >= since]
    key_of = {m["id"]: (m["topic"], m["group_name"]) for m in relevant}
    finishing = [
        e for e in world.traces
        if e["message_id"] in key_of and since <= e["at"] < until
        and (e["event"] in ("acked", "dead") or (e["event"] == "lease_expired" and e["status_after"] == "TIMEOUT"))
    ]
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    hourly: dict[tuple[str, str, datetime], list[int]] = defaultdict(lambda: [0, 0])
    for m in relevant:
        if since <= m["add_time"] < until:
            hourly[(m["topic"], m["group_name"], m["add_time"].replace(minute=0, second=0, microsecond=0))][0] += 1
    for e in finishing:
        hourly[(*key_of[e["message_id"]], e["at"].replace(minute=0, second=0, microsecond=0))][1] += 1
    for key in sorted(set(key_of.values())):
        mine = [m for m in relevant if (m["topic"], m["group_name"]) == key]
        deliverable = [m for m in mine if m["status"] == "NEW" and m["effect_time"] <= until]
        inflow = sum(v[0] for (t, g, _h), v in hourly.items() if (t, g) == key)
        outflow = sum(v[1] for (t, g, _h), v in hourly.items() if (t, g) == key)
        backlog = len(deliverable)
        net = (outflow - inflow) / hours
        growth = (inflow - outflow) / hours
        band = max(inflow, outflow) / hours * 0.01
        groups[key] = {
            "backlog": backlog,
            "delayed": sum(1 for m in mine if m["status"] == "NEW" and m["effect_time"] > until),
            "running": sum(1 for m in mine if m["status"] == "RUNNING"),
            "oldest_age_seconds": seconds(until, min(m["effect_time"] for m in deliverable)) if deliverable else None,
            "inflow": inflow,
            "outflow": outflow,
            "inflow_per_hour": inflow / hours,
            "outflow_per_hour": outflow / hours,
            "growth_per_hour": growth,
            "trend": "growing" if growth > band else "shrinking" if growth < -band else "steady",
            "drain_hours": 0.0 if backlog == 0 else (backlog / net if net > 0 else None),
        }
    alarms = sorted(
        [(t, g, row["backlog"], thresholds[t]) for (t, g), row in groups.items()
         if t in thresholds and row["backlog"] >= thresholds[t]],
        key=lambda a: (-a[2] / a[3], a[0], a[1]),
    )
    return {"groups": groups, "hourly": dict(hourly), "alarms": alarms}
