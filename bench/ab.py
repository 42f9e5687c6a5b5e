"""One checkout against another: `python -m bench.ab [--messages N] [--rounds R] [--figures F,...] TREE...`.

Each TREE is a checkout of MQ Center with a `.venv` (for an older commit: `git worktree add
/tmp/old <commit>`, `ln -s $PWD/.venv /tmp/old/.venv`, `mkdir /tmp/old/var`). Each round
runs the figures once per tree, in turn, on a broker started from that tree's code, the
trees' order reversed every other round (`round_order`), so a shared machine's drift and a
run's place in its round fall on every tree alike; a change's effect is the ratio of the
medians, which a full run cannot isolate (a machine differs from one day to the next far
more than a change moves the figure). The figures (`--figures`, all by default):

- `produce`: msg/s posted by 4 client threads in batches of 100 (`load.produce_rate`);
- `e2e`: N messages drained by 4 SDK consumer processes, msg/s, and CPU µs per message by
  part (`load.sdk_e2e_rate`);
- `latency`: produce call → handler start of one idle SDK consumer, p50 / p99 ms
  (`load.sdk_latency`);
- `burst`: 1,000 waiting pulls woken by one produce of 1,000, wake p50 / p99 ms and errors
  (`figures._longpoll_once`);
- `statements`: per delivered message, what the database is asked (`bench.statements`),
  once per tree: deterministic, so not repeated.

Every database, topic and Redis key it uses is named after MQ_BENCH_ID (default `ab`), so
engineers sharing a machine do not collide; the text run in each tree uses only what every
revision of the bench has. Prints a JSON line per run, then each figure's medians and their
ratio to the first tree's. Not part of `bench all`; never run it next to the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

FIGURES = ("produce", "e2e", "latency", "burst", "statements")

RUN = """
import json, os
from bench import figures, load
from bench.common import percentile
ident = os.environ.get("MQ_BENCH_ID") or "ab"
wanted = {wanted!r}
broker = figures._started("ab_" + ident)
out = {{}}
try:
    topic = "ab_" + ident
    load.ensure_topic(broker, topic)
    if "produce" in wanted:
        broker.truncate()
        out["produce_msg_s"] = load.produce_rate(broker, topic, {produce})
    if "e2e" in wanted:
        broker.truncate()
        cpu = {{}}
        out["e2e_msg_s"] = load.sdk_e2e_rate(broker, topic, {messages}, cpu=cpu)
        out["broker_us_msg"] = cpu.get("broker")
        out["cpu_us_msg"] = cpu
    if "latency" in wanted:
        broker.truncate()
        samples = load.sdk_latency(broker, topic + "_lat", {samples})
        out["latency_p50_ms"] = percentile(samples, 50) * 1000
        out["latency_p99_ms"] = percentile(samples, 99) * 1000
    if "burst" in wanted:
        broker.truncate()
        lp = "lp_" + ident
        load.ensure_topic(broker, lp)
        load.put_history(broker, lp)
        run = _burst(broker, lp)
        out["burst_p50_ms"] = run["wake_p50_ms"]
        out["burst_p99_ms"] = run["wake_p99_ms"]
        out["burst_errors"] = run["errors"]
        out["burst_served"] = run["served"]
finally:
    broker.teardown()
print("RESULT " + json.dumps(out))
"""

# `figures._longpoll_once` waits on the topic "lp"; this runs the same on another topic.
BURST = '''
def _burst(broker, topic):
    import inspect, textwrap
    source = textwrap.dedent(inspect.getsource(figures._longpoll_once)).replace('"lp"', repr(topic))
    space = dict(figures.__dict__)
    exec(compile(source, "<burst>", "exec"), space)
    return space["_longpoll_once"](broker, {waiters})
'''


def run(tree: Path, script: str, env: dict[str, str]) -> dict[str, object]:
    """Run `script` with `tree`'s interpreter, its directory first on the path."""
    done = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", script],
                          cwd=tree, capture_output=True, text=True, check=False, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the run in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))  # type: ignore[no-any-return]


def round_order(trees: list[Path], round_: int) -> list[Path]:
    """The trees in the order round `round_` (from 0) runs them: as given, then reversed, in
    turn. A sitting's drift favours the tree that runs first in every round (this machine's
    idle latency climbs through a sitting: bench/results/ab_issue40.md)."""
    return list(trees) if round_ % 2 == 0 else list(reversed(trees))


def main(argv: list[str] | None = None) -> dict[str, dict[str, list[float]]]:
    parser = argparse.ArgumentParser(prog="python -m bench.ab")
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--messages", type=int, default=100_000, help="end-to-end drain size")
    parser.add_argument("--produce", type=int, default=40_000, help="messages per produce run")
    parser.add_argument("--samples", type=int, default=100, help="latency samples")
    parser.add_argument("--waiters", type=int, default=1000, help="waiting pulls of the burst")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--figures", default=",".join(FIGURES))
    args = parser.parse_args(argv)
    wanted = [f for f in args.figures.split(",") if f]
    unknown = set(wanted) - set(FIGURES)
    if unknown:
        parser.error(f"unknown figures: {', '.join(sorted(unknown))}")
    env = {**os.environ, "MQ_BENCH_ID": os.environ.get("MQ_BENCH_ID") or "ab"}
    values: dict[str, dict[str, list[float]]] = {str(tree): {} for tree in args.trees}
    if "statements" in wanted:
        source = (Path(__file__).parent / "statements.py").read_text()
        for tree in args.trees:
            counts = run(tree.resolve(), source.replace('if __name__ == "__main__":', "if True:"), env)
            print(json.dumps({"tree": str(tree), "statements_per_message": counts}), flush=True)
            for part, figures in counts.items():
                for name, value in figures.items():  # type: ignore[attr-defined]
                    values[str(tree)][f"{part}.{name}"] = [float(value)]
    timed = [f for f in wanted if f != "statements"]
    script = BURST.format(waiters=args.waiters) + RUN.format(
        wanted=timed, produce=args.produce, messages=args.messages, samples=args.samples)
    for round_ in range(args.rounds if timed else 0):
        for tree in round_order(args.trees, round_):
            result = run(tree.resolve(), script, env)
            print(json.dumps({"round": round_ + 1, "tree": str(tree), **result}), flush=True)
            for name, value in result.items():
                if isinstance(value, int | float):
                    values[str(tree)].setdefault(name, []).append(float(value))
    first = values[str(args.trees[0])]
    for tree, figures in values.items():
        print(f"== {tree}", flush=True)
        for name, series in figures.items():
            median = statistics.median(series)
            base = statistics.median(first.get(name, [median])) or float("nan")
            print(f"  {name:38} median {median:12,.3f}  (min {min(series):,.3f}, max {max(series):,.3f})"
                  f"  {median / base:6.3f} x first", flush=True)
    return values


if __name__ == "__main__":
    main(sys.argv[1:])
