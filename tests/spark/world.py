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
BURST = ("batch", "nightly")
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
    timelines: dict[int, list[tuple[datetime, str, datetime]]] = field(default_factory=dict)

    def traces_of(self, ids: set[int]) -> list[dict[str, Any]]:
        return [t for t in self.traces if t["message_id"] in ids]


def generate(seed: int = 7, count: int = 420) -> World:
    rng = random.Random(seed)
    world = World()
    trace_id = 0
    for mid in range(1, count + 1):
        topic, group = GROUPS[mid % len(GROUPS)]
        add_time = SINCE - timedelta(hours=3) + timedelta(seconds=rng.uniform(0, 10 * 3600))
        if mid % 10 == 0:  # a bursty topic: produced within ten minutes, idle the other hours
            topic, group = BURST
            add_time = SINCE + timedelta(hours=1, seconds=rng.uniform(0, 600))
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
        # (time, status, effect_time) from each change on: the state at any moment, kept by
        # the simulation itself, never derived from the events the reports read.
        timeline: list[tuple[datetime, str, datetime]] = [(add_time, "NEW", effect)]
        # The pull of the last delivery a claim made is held by the row too (`pulled_at`, by
        # its lease_owner); a later claim writes the earlier one out as a trace row.
        claimed_pull: dict[str, Any] | None = None
        for i in range(deliveries):
            t += timedelta(seconds=rng.uniform(0.5, 900))
            attempt += 1
            consumer = rng.choice(CONSUMERS)
            if rng.random() < 0.1:
                # Pulled, then handed back unstarted: NEW at once, the attempt not spent.
                event("pulled", consumer, t, attempt, "RUNNING")
                at_release = t + timedelta(seconds=round(rng.uniform(0.01, 5), 6))
                event("released", consumer, at_release, attempt - 1, "NEW")
                timeline.append((t, "RUNNING", effect))
                effect = at_release
                timeline.append((at_release, "NEW", effect))
                t = at_release + timedelta(seconds=rng.uniform(0.5, 60))
                consumer = rng.choice(CONSUMERS)
            event("pulled", consumer, t, attempt, "RUNNING")
            timeline.append((t, "RUNNING", effect))
            claimed_pull = events[-1]
            done = t + timedelta(seconds=round(rng.uniform(0.01, 30), 6))
            fate = rng.choice(["nack", "nack", "expire"]) if i < deliveries - 1 else rng.choice(
                ["ack", "ack", "ack", "ack", "dead", "timeout", "running", "pending"])
            if fate in ("nack", "pending", "dead"):
                # As the broker writes them: the nack in the state it found (RUNNING), then
                # the retry or the dead letter.
                event("nacked", consumer, done, attempt, "RUNNING", rng.choice(REASONS))
                if fate == "dead":
                    event("dead", consumer, done, attempt, "FAIL", "no retries left")
                    status = "FAIL"
                else:
                    delay = timedelta(seconds=rng.choice([5, 60, 5 * 3600]))
                    effect = done + delay
                    event("retry_scheduled", consumer, done, attempt, "NEW", f"retry at {effect.isoformat()}")
                    status = "NEW"
            elif fate == "expire":
                done += timedelta(seconds=60)
                effect, status = done + timedelta(seconds=rng.choice([0, 5, 5 * 3600])), "NEW"
                event("lease_expired", "broker", done, attempt, "NEW",
                      f"lease of {consumer} expired; retry at {effect.isoformat()}")
            elif fate == "timeout":
                done += timedelta(seconds=60)
                event("lease_expired", "broker", done, attempt, "TIMEOUT", f"lease of {consumer} expired; no retries left")
                status = "TIMEOUT"
            elif fate == "ack" and attempt == 1:
                # A first delivery's success, as consumers send most: held by the row only
                # (SUCCESS, attempt 1, its update_time), as its pull is.
                event("acked", consumer, done, attempt, "SUCCESS", "", in_row=True)
                status = "SUCCESS"
            elif fate == "ack":
                event("acked", consumer, done, attempt, "SUCCESS", "ok")
                status = "SUCCESS"
            else:  # running: pulled, no answer yet
                status = "RUNNING"
            if status != "RUNNING":
                timeline.append((done, status, effect))
            t = done
        if status in ("FAIL", "TIMEOUT") and rng.random() < 0.4:
            # Redriven by an operator: NEW again now, and perhaps delivered and acked.
            t += timedelta(seconds=rng.uniform(60, 3600))
            effect, status = t, "NEW"
            event("redriven", "user:olga", t, attempt, "NEW", rng.choice(["redrive", "requeue"]))
            timeline.append((t, "NEW", effect))
            if rng.random() < 0.5:
                t += timedelta(seconds=rng.uniform(1, 600))
                attempt += 1
                consumer = rng.choice(CONSUMERS)
                event("pulled", consumer, t, attempt, "RUNNING")
                timeline.append((t, "RUNNING", effect))
                claimed_pull = events[-1]
                t += timedelta(seconds=round(rng.uniform(0.01, 30), 6))
                event("acked", consumer, t, attempt, "SUCCESS", "ok")
                timeline.append((t, "SUCCESS", effect))
                status = "SUCCESS"
        if claimed_pull is not None:
            claimed_pull["in_row"] = True
        for e in events:
            trace_id += 1
            e["id"] = trace_id
        world.traces.extend(events)
        world.timelines[mid] = timeline
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
    consumers = expected_consumers(events, key_of)
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


def expected_consumers(
    events: list[dict[str, Any]], key_of: dict[int, tuple[str, str]]
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Per consumer: every pull is a delivery; a release hands it back unspent (no attempt);
    an attempt ends acked, nacked or expired (its lease, blamed on the consumer that pulled
    it); failure rate = (nacked + expired) / (acked + nacked + expired)."""
    consumers: dict[tuple[str, str, str], dict[str, Any]] = {}
    holder: dict[int, str] = {}

    def row(mid: int, actor: str) -> dict[str, Any]:
        return consumers.setdefault((*key_of[mid], actor), {
            "deliveries": 0, "released": 0, "attempts": 0, "acked": 0, "nacked": 0, "expired": 0})

    for e in sorted(events, key=lambda e: (e["at"], e["id"])):
        mid = e["message_id"]
        if e["event"] == "pulled":
            holder[mid] = e["actor"]
            row(mid, e["actor"])["deliveries"] += 1
        elif e["event"] == "released":
            row(mid, e["actor"])["released"] += 1
        elif e["event"] in ("acked", "nacked"):
            row(mid, e["actor"])[e["event"]] += 1
        elif e["event"] == "lease_expired":
            row(mid, holder[mid])["expired"] += 1
    for key, item in consumers.items():
        item["attempts"] = item["deliveries"] - item["released"]
        ended = item["acked"] + item["nacked"] + item["expired"]
        item["failure_rate"] = (item["nacked"] + item["expired"]) / ended if ended else None
        mine = [d["processing"] for d in deliveries(events) if (*key_of[d["message_id"]], d["actor"]) == key]
        item["processing_p50"] = nearest_rank(mine, 0.5)
    return consumers


def state_at(world: World, mid: int, moment: datetime) -> tuple[str, datetime] | None:
    """A message's (status, effect_time) just before `moment`, from the simulation's own
    timeline; None before it was produced."""
    state = None
    for at, status, effect in world.timelines[mid]:
        if at >= moment:
            break
        state = (status, effect)
    return state


UNFINISHED = ("NEW", "RUNNING")


def expected_heap(world: World, since: datetime, until: datetime, thresholds: dict[str, int]) -> dict[str, Any]:
    """The heap as of `until` and the flow over [since, until): a message flows in when it
    becomes unfinished (produced, or redriven/requeued after it finished) and out when it
    finishes; rates are per active hour (an hour of the window with any flow in its group)."""
    key_of = {m["id"]: (m["topic"], m["group_name"]) for m in world.messages}
    hourly: dict[tuple[str, str, datetime], list[int]] = defaultdict(lambda: [0, 0])
    for mid, timeline in world.timelines.items():
        before = None
        for at, status, _effect in timeline:
            hour = at.replace(minute=0, second=0, microsecond=0)
            if since <= at < until:
                if status in UNFINISHED and before not in UNFINISHED:
                    hourly[(*key_of[mid], hour)][0] += 1
                elif status not in UNFINISHED and before in UNFINISHED:
                    hourly[(*key_of[mid], hour)][1] += 1
            before = status
    states = {mid: state_at(world, mid, until) for mid in key_of}
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for key in sorted(set(key_of.values())):
        mine = [s for mid, s in states.items() if key_of[mid] == key and s is not None]
        deliverable = [effect for status, effect in mine if status == "NEW" and effect <= until]
        points = [v for (t, g, _h), v in hourly.items() if (t, g) == key]
        inflow = sum(v[0] for v in points)
        outflow = sum(v[1] for v in points)
        active = sum(1 for v in points if v[0] or v[1])
        backlog = len(deliverable)
        row = {
            "backlog": backlog,
            "delayed": sum(1 for status, effect in mine if status == "NEW" and effect > until),
            "running": sum(1 for status, _ in mine if status == "RUNNING"),
            "oldest_age_seconds": seconds(until, min(deliverable)) if deliverable else None,
            "inflow": inflow,
            "outflow": outflow,
            "active_hours": active,
        }
        if not any(row[k] for k in ("backlog", "delayed", "running", "inflow", "outflow")):
            continue
        per_hour = (lambda n: n / active) if active else (lambda n: 0.0)
        net = per_hour(outflow - inflow)
        growth = per_hour(inflow - outflow)
        band = max(per_hour(inflow), per_hour(outflow)) * 0.01
        row.update({
            "inflow_per_hour": per_hour(inflow),
            "outflow_per_hour": per_hour(outflow),
            "growth_per_hour": growth,
            "trend": "growing" if growth > band else "shrinking" if growth < -band else "steady",
            "drain_hours": 0.0 if backlog == 0 else (backlog / net if net > 0 else None),
        })
        groups[key] = row
    alarms = sorted(
        [(t, g, row["backlog"], thresholds[t]) for (t, g), row in groups.items()
         if t in thresholds and row["backlog"] >= thresholds[t]],
        key=lambda a: (-a[2] / a[3], a[0], a[1]),
    )
    return {"groups": groups, "hourly": dict(hourly), "alarms": alarms}
