"""Live counts for the console, fresh within a second, without counting the hot table.

Per (topic, group): waiting (NEW), in flight (RUNNING) and dead (FAIL, TIMEOUT or EXPIRED) messages,
and per minute the messages produced and acknowledged. Every state change the hot path
makes (produce, claim, ack, release, lease expiry) and the operators' changes (edit,
redrive, requeue, cancel, delete, transaction commit) report their moves with
`live_moved` once they commit. A process adds them up in memory and, every PUSH_SECONDS,
adds them to Redis (a hash of counters) and signals the changed pairs to every process's
console sockets over Redis pub/sub (the console hub). Without REDIS_URL (the quick start)
the counters live in the process, which serves the console too.

The counters are a hint: a crash between a commit and the push loses a move, and a change
made elsewhere (a topic or group deleted, the archive) is not reported; a replay reports
its copies (`live_copied`). The flush job therefore sets them to the backlog it counts from the claim index every run
(`live_reset`, from `stats_snapshot`); a reader finding them older than STALE_SECONDS (no
flush job running) counts once itself (`stats.backlog_live`). Produced and acked per minute come from here for
the last FLOW_MINUTES only: the flush job's buckets have them after that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from messages.models import Status
from registry.wakeups import WakeupHub

logger = logging.getLogger(__name__)

GAUGES = {Status.NEW: "new", Status.RUNNING: "running", Status.FAIL: "dead", Status.TIMEOUT: "dead",
          Status.EXPIRED: "dead"}
GAUGE_NAMES = ("new", "running", "dead")
FLOWS = ("produced", "acked")
PUSH_SECONDS = 0.25
STALE_SECONDS = 60.0
FLOW_MINUTES = 5
FLOW_TTL_SECONDS = 15 * 60


def _key(name: str) -> str:
    """A live-counter key of this installation: several MQ Center databases may share one
    Redis, and each keeps its own counts."""
    return f"mq:live:{connection.settings_dict['NAME']}:{name}"

CONSOLE_CHANNEL = "mqcenter:console"

Pair = tuple[str, str]
Move = tuple[str, str, str | None, str | None]  # topic, group, status before (None: new), after


def live_moved(moves: Iterable[Move]) -> None:
    """Count state changes once the caller's transaction commits (at once outside one).
    A move from None is a produced message; from RUNNING to SUCCESS an acked one."""
    deltas: dict[tuple[str, str, str], int] = defaultdict(int)
    for topic, group, before, after in moves:
        if before == after:
            continue
        if before in GAUGES:
            deltas[(topic, group, GAUGES[before])] -= 1
        if after in GAUGES:
            deltas[(topic, group, GAUGES[after])] += 1
        if before is None:
            deltas[(topic, group, "produced")] += 1
        elif before == Status.RUNNING and after == Status.SUCCESS:
            deltas[(topic, group, "acked")] += 1
    changed = {key: n for key, n in deltas.items() if n}
    if changed:
        transaction.on_commit(lambda: live_store().add(changed))


def live_copied(topic: str, group: str, count: int) -> None:
    """Count `count` NEW messages copied into a group (a replay) once the caller's transaction
    commits: waiting at once, not produced (the publishes were counted when produced)."""
    if count:
        transaction.on_commit(lambda: live_store().add({(topic, group, "new"): count}))


def live_reset(*, snapshot: dict[Pair, dict[str, Any]], at: datetime) -> None:
    """Set the counters to a backlog counted from the database (`stats.backlog_now`)."""
    counts = {
        pair: {
            "new": (e["deliverable"] or 0) + (e["delayed"] or 0),
            "running": e["running"] or 0,
            "dead": e["dead"] or 0,
        }
        for pair, e in snapshot.items()
    }
    live_store().reset(counts, at.timestamp())


def live_counts() -> tuple[dict[Pair, dict[str, int]], datetime | None]:
    """Waiting, in flight and dead per (topic, group), and when the database last set them
    (`stats.backlog_live` counts first when that is too long ago)."""
    counts, as_of = live_store().read()
    return counts, datetime.fromtimestamp(as_of, UTC) if as_of else None


def live_recount_due(as_of: datetime | None) -> bool:
    """Whether this reader should set the counters from the database now: nothing set them
    for STALE_SECONDS (no flush job running), and no other reader took the turn."""
    stale = as_of is None or time.time() - as_of.timestamp() > STALE_SECONDS
    return stale and live_store().claim_recount()


def live_flow(*, since: datetime) -> dict[tuple[str, str, datetime], dict[str, int]]:
    """Produced and acked per (topic, group, minute) from `since` (at most FLOW_MINUTES ago)."""
    first = max(int(since.timestamp() // 60), int(time.time() // 60) - FLOW_MINUTES + 1)
    return live_store().flow(list(range(first, int(time.time() // 60) + 1)))


def live_listen(pairs: Iterable[Pair], callback: Callable[[Pair], None]) -> Callable[[], None]:
    """Call `callback(pair)` (from another thread) when a pair's counts changed; returns
    the function that stops listening. `registry.wakeups.ANY` listens to every pair."""
    return console_hub().listen(pairs, callback)


def _field(topic: str, group: str, name: str) -> str:
    return f"{topic}\t{group}\t{name}"  # names never hold a tab (NAME_PATTERN)


class LiveStore:
    """The counters: in Redis (shared by every process) or, without REDIS_URL, here."""

    def __init__(self, redis_url: str) -> None:
        self.redis_url = redis_url
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, str], int] = defaultdict(int)
        self._pending_flow: dict[tuple[int, str, str, str], int] = defaultdict(int)
        self._pusher: threading.Thread | None = None
        self._client: Any = None
        self._local: dict[str, int] = {}
        self._local_flow: dict[int, dict[str, int]] = {}
        self._local_as_of: float | None = None
        self._local_recount_at = 0.0

    def add(self, deltas: dict[tuple[str, str, str], int]) -> None:
        minute = int(time.time() // 60)
        with self._lock:
            for (topic, group, name), n in deltas.items():
                if name in FLOWS:
                    self._pending_flow[(minute, topic, group, name)] += n
                else:
                    self._pending[(topic, group, name)] += n
            if self._pusher is None:
                self._pusher = threading.Thread(
                    target=self._push_forever, name="mq-live-counts", daemon=True
                )
                self._pusher.start()

    def _push_forever(self) -> None:
        while True:
            time.sleep(PUSH_SECONDS)  # coalesces a burst of moves into one write and one signal
            try:
                self.push()
            except Exception as exc:  # noqa: BLE001 - a hint: the flush job sets the counts again
                logger.warning("live counts not pushed (%s)", exc)

    def push(self) -> None:
        with self._lock:
            pending, flow = self._pending, self._pending_flow
            self._pending, self._pending_flow = defaultdict(int), defaultdict(int)
        if not pending and not flow:
            return
        if self.redis_url:
            pipe = self._redis().pipeline(transaction=False)
            for (topic, group, name), n in pending.items():
                pipe.hincrby(_key("counts"), _field(topic, group, name), n)
            for (minute, topic, group, name), n in flow.items():
                pipe.hincrby(_key(f"flow:{minute}"), _field(topic, group, name), n)
                pipe.expire(_key(f"flow:{minute}"), FLOW_TTL_SECONDS)
            pipe.execute()
        else:
            with self._lock:
                for (topic, group, name), n in pending.items():
                    key = _field(topic, group, name)
                    self._local[key] = self._local.get(key, 0) + n
                for (minute, topic, group, name), n in flow.items():
                    bucket = self._local_flow.setdefault(minute, {})
                    key = _field(topic, group, name)
                    bucket[key] = bucket.get(key, 0) + n
                oldest = int(time.time() // 60) - FLOW_TTL_SECONDS // 60
                for minute in [m for m in self._local_flow if m < oldest]:
                    del self._local_flow[minute]
        pairs = {(t, g) for t, g, _ in pending} | {(t, g) for _, t, g, _ in flow}
        console_hub().publish(pairs)

    def reset(self, counts: dict[Pair, dict[str, int]], as_of: float) -> None:
        mapping = {
            _field(t, g, name): n for (t, g), values in counts.items() for name, n in values.items()
        }
        if self.redis_url:
            pipe = self._redis().pipeline(transaction=True)
            pipe.delete(_key("counts"))
            if mapping:
                pipe.hset(_key("counts"), mapping=mapping)  # type: ignore[arg-type]
            pipe.set(_key("as_of"), repr(as_of))
            pipe.execute()
        else:
            with self._lock:
                self._local, self._local_as_of = dict(mapping), as_of
        console_hub().publish(list(counts))

    def read(self) -> tuple[dict[Pair, dict[str, int]], float | None]:
        if self.redis_url:
            pipe = self._redis().pipeline(transaction=False)
            pipe.hgetall(_key("counts"))
            pipe.get(_key("as_of"))
            raw, as_of = pipe.execute()
            fields = {k.decode(): int(v) for k, v in raw.items()}
            stamp = float(as_of) if as_of else None
        else:
            with self._lock:
                fields, stamp = dict(self._local), self._local_as_of
        counts: dict[Pair, dict[str, int]] = {}
        for key, n in fields.items():
            topic, group, name = key.split("\t")
            counts.setdefault((topic, group), dict.fromkeys(GAUGE_NAMES, 0))[name] = max(n, 0)
        return counts, stamp

    def flow(self, minutes: list[int]) -> dict[tuple[str, str, datetime], dict[str, int]]:
        if self.redis_url:
            pipe = self._redis().pipeline(transaction=False)
            for minute in minutes:
                pipe.hgetall(_key(f"flow:{minute}"))
            per_minute = [{k.decode(): int(v) for k, v in raw.items()} for raw in pipe.execute()]
        else:
            with self._lock:
                per_minute = [dict(self._local_flow.get(minute, {})) for minute in minutes]
        out: dict[tuple[str, str, datetime], dict[str, int]] = {}
        for minute, fields in zip(minutes, per_minute, strict=True):
            at = datetime.fromtimestamp(minute * 60, UTC)
            for key, n in fields.items():
                topic, group, name = key.split("\t")
                out.setdefault((topic, group, at), dict.fromkeys(FLOWS, 0))[name] = n
        return out

    def claim_recount(self) -> bool:
        """Whether this reader counts the backlog now: one reader every 10 s at most."""
        if self.redis_url:
            return bool(self._redis().set(_key("recount"), "1", nx=True, ex=10))
        with self._lock:
            if time.time() - self._local_recount_at < 10:
                return False
            self._local_recount_at = time.time()
            return True

    def clear(self) -> None:
        """Forget every counter (a test's fresh start; the next read counts again)."""
        with self._lock:
            self._pending.clear()
            self._pending_flow.clear()
            self._local, self._local_flow, self._local_as_of, self._local_recount_at = (
                {},
                {},
                None,
                0.0,
            )
        if self.redis_url:
            client = self._redis()
            client.delete(_key("counts"), _key("as_of"), _key("recount"), *client.scan_iter(_key("flow:*")))

    def _redis(self) -> Any:
        if self._client is None:
            import redis

            self._client = redis.Redis.from_url(
                self.redis_url, socket_timeout=0.5, socket_connect_timeout=0.5
            )
        return self._client


_store: LiveStore | None = None
_hub: WakeupHub | None = None
_singletons = threading.Lock()


def live_store() -> LiveStore:
    global _store
    if _store is None:
        with _singletons:
            if _store is None:
                _store = LiveStore(settings.REDIS_URL)
    return _store


def console_hub() -> WakeupHub:
    """Signals "these pairs' counts changed" to the console sockets of every process."""
    global _hub
    if _hub is None:
        with _singletons:
            if _hub is None:
                _hub = WakeupHub(settings.REDIS_URL, channel=CONSOLE_CHANNEL)
    return _hub
