"""End to end, one checkout against another: `python -m bench.ab [--messages N] [--rounds R] TREE...`.

Each TREE is a checkout of MQ Center with a `.venv` (for an older commit: `git worktree add
/tmp/old <commit>`, `ln -s $PWD/.venv /tmp/old/.venv`, `mkdir /tmp/old/var`). Each round
drains N messages once per tree, in turn (`load.sdk_e2e_rate`: 4 SDK consumer processes, no-op
handlers, a broker started from that tree's code), so a shared machine's drift falls on every
tree alike; a change's effect is the ratio of the medians, which a full run cannot isolate
(a machine differs from one day to the next far more than a change moves the figure).
Prints a JSON line per drain (rate, CPU µs per message by part), then the medians. Not part of
`bench all`; never run it next to the test suite or another bench.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

DRAIN = """
import json
from bench import figures, load
broker = figures._started("bench")
try:
    load.ensure_topic(broker, "bench")
    broker.truncate()
    cpu = {{}}
    rate = load.sdk_e2e_rate(broker, "bench", {messages}, cpu=cpu)
    print("RESULT " + json.dumps({{"rate": rate, "cpu": cpu}}))
finally:
    broker.teardown()
"""


def drain(tree: Path, messages: int) -> dict[str, object]:
    """One drain on a broker run from `tree`'s code (its own interpreter, its directory first
    on the path)."""
    done = subprocess.run([str(tree / ".venv" / "bin" / "python"), "-c", DRAIN.format(messages=messages)],
                          cwd=tree, capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if not lines:
        raise RuntimeError(f"the drain in {tree} failed:\n{done.stderr[-3000:]}")
    return json.loads(lines[-1].removeprefix("RESULT "))


def main(argv: list[str] | None = None) -> dict[str, list[float]]:
    parser = argparse.ArgumentParser(prog="python -m bench.ab")
    parser.add_argument("trees", nargs="+", type=Path)
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    rates: dict[str, list[float]] = {str(tree): [] for tree in args.trees}
    for round_ in range(args.rounds):
        for tree in args.trees:
            result = drain(tree.resolve(), args.messages)
            rates[str(tree)].append(float(result["rate"]))  # type: ignore[arg-type]
            print(json.dumps({"round": round_ + 1, "tree": str(tree), **result}), flush=True)
    first = statistics.median(rates[str(args.trees[0])])
    for tree, values in rates.items():
        median = statistics.median(values)
        print(f"{tree}: median {median:,.0f} msg/s (min {min(values):,.0f}, max {max(values):,.0f}),"
              f" {median / first:.3f} x {args.trees[0]}", flush=True)
    return rates


if __name__ == "__main__":
    main(sys.argv[1:])
