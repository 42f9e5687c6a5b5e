"""`python -m bench FIGURE...`: FIGURE is all, baselines, dblimit, peers, produce, e2e, latency,
backlog, longpoll, console, serving, soak or report; several run in the order given
(`python -m bench baselines produce e2e`).

Options: `--scale toy|small|full` (default small), `--repeats N`, `--soak-seconds S`,
`--soak-rate R`, `--serving NAME` (which SERVINGS entry serves the broker; default uvicorn2),
`--results DIR`, `--database mariadb|postgres`. Results accumulate in DIR/results.json; every command rewrites the
Markdown table and the charts from it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

POSTGRES_FIGURES = {"dblimit", "produce", "e2e", "report"}
FIGURES = ["baselines", "produce", "fanout", "e2e", "latency", "backlog", "longpoll", "console", "serving", "soak"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("figures", nargs="+", metavar="figure", choices=["all", "report", "dblimit", "peers", *FIGURES])
    parser.add_argument("--scale", default="small", choices=["toy", "small", "full"])
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--soak-seconds", type=float)
    parser.add_argument("--soak-rate", type=float)
    parser.add_argument("--serving", help="uvicorn1, uvicorn2, gunicorn-uvicorn2")
    parser.add_argument("--results", type=Path)
    parser.add_argument("--note", default="", help="free text stored with the run (e.g. 'machine shared')")
    parser.add_argument("--database", default="mariadb", choices=["mariadb", "postgres"],
                        help="the broker's database; postgres (MQ_BENCH_POSTGRES, default "
                             "postgres://root@127.0.0.1:5432) runs dblimit, produce and e2e, stored as *_pg")
    args = parser.parse_args(argv)
    if args.database == "postgres" and not set(args.figures) <= POSTGRES_FIGURES:
        parser.error(f"with --database postgres, figures are {', '.join(sorted(POSTGRES_FIGURES))}")
    os.environ["MQ_BENCH_DATABASE"] = args.database
    if args.results:
        os.environ["MQ_BENCH_RESULTS"] = str(args.results)
    if args.serving:
        os.environ["MQ_BENCH_SERVING"] = args.serving

    # imported after the environment is set: the modules read it at import time
    from bench import fanout, figures, report, serving, soak
    from bench.common import DEFAULT_SERVING, RESULTS_DIR, SCALES, Results

    scale = SCALES[args.scale]
    if args.repeats:
        scale = dataclasses.replace(scale, repeats=args.repeats)
    results = Results(path=RESULTS_DIR / "results.json").load()
    if args.figures != ["report"]:
        command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
        meta = results.data.setdefault("meta", {})
        meta.setdefault("commands", []).append({
            "command": command, "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_at_start": round(os.getloadavg()[0], 2), "note": args.note})
        meta.update({"scale": dataclasses.asdict(scale), "serving": DEFAULT_SERVING, "cores": os.cpu_count()})
    results.save()
    runners = {
        "baselines": lambda: figures.baselines(scale, results),
        "dblimit": lambda: figures.database_limit(scale, results),
        "peers": lambda: figures.peers_figure(scale, results),
        "produce": lambda: figures.produce(scale, results),
        "fanout": lambda: fanout.fanout(scale, results),
        "e2e": lambda: figures.e2e(scale, results),
        "latency": lambda: figures.latency(scale, results),
        "backlog": lambda: figures.backlog_figure(scale, results),
        "longpoll": lambda: figures.longpoll(scale, results),
        "console": lambda: figures.console(scale, results),
        "serving": lambda: serving.serving(scale, results),
        "soak": lambda: soak.soak(scale, results, args.soak_seconds, args.soak_rate),
    }
    chosen: list[str] = []
    for figure in args.figures:
        names = FIGURES if figure == "all" else [] if figure == "report" else [figure]
        chosen += [name for name in names if name not in chosen]
    failed: list[str] = []
    for name in chosen:
        print(f"== {name} ({scale.name}) load {os.getloadavg()[0]:.1f}", flush=True)
        results.data.get("figures", {}).pop(f"failed_{name}", None)
        try:
            runners[name]()
        except Exception as exc:  # noqa: BLE001 - one broken figure must not lose the others
            import traceback

            traceback.print_exc()
            failed.append(f"{name}: {exc}")
            results.put(f"failed_{name}", {"error": str(exc)[:500]})
        report.write(results.data, RESULTS_DIR)
    report.write(results.data, RESULTS_DIR)
    print((RESULTS_DIR / "results.md").read_text())
    if failed:
        print("FAILED:", *failed, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
