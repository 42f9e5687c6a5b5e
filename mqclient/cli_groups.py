"""``mqclient groups ...``: manage a topic's groups (subscriptions) from the command line.

    mqclient groups list orders
    mqclient groups show orders audit
    mqclient groups create orders audit --start earliest [--max-in-flight 10] [--exist-ok]
    mqclient groups pause|resume orders audit
    mqclient groups set orders audit --rate 50 --max-in-flight none
    mqclient groups replay orders audit --since 2026-11-25T08:00:00Z
    mqclient groups delete orders audit --yes

Each prints the broker's answer as JSON (``list`` prints a table unless ``--json``). Errors
print one line ``mqclient: ...`` on stderr and exit with status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from mqclient.admin import Admin, subscription_filter

#: Columns of ``groups list``: (heading, key of the group's state).
COLUMNS = (
    ("GROUP", "group"),
    ("MODE", "mode"),
    ("PAUSED", "paused"),
    ("BACKLOG", "backlog"),
    ("IN_FLIGHT", "in_flight"),
    ("DEAD", "dead"),
    ("CONSUMERS", "consumers_online"),
    ("MAX_IN_FLIGHT", "max_in_flight"),
    ("RATE", "rate_per_second"),
)


class UsageError(Exception):
    """A command line the broker need not see: printed as ``mqclient: ...``, exit 2."""


def _limit(kind: Callable[[str], Any]) -> Callable[[str], Any]:
    """A limit's value: a number, or ``none`` to lift the limit."""

    def parse(raw: str) -> Any:
        if raw.lower() in {"none", "null", "off"}:
            return None
        try:
            return kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number or 'none', got {raw!r}") from None

    return parse


def _add_limits(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--mode", choices=["queue", "serial", "sharded"])
    parser.add_argument(
        "--max-in-flight",
        type=_limit(int),
        default=argparse.SUPPRESS,
        metavar="N",
        help="RUNNING messages of the group at once ('none' lifts it)",
    )
    parser.add_argument(
        "--rate",
        type=_limit(float),
        default=argparse.SUPPRESS,
        dest="rate_per_second",
        metavar="N",
        help="deliveries per second ('none' lifts it)",
    )
    parser.add_argument(
        "--key-concurrency",
        type=int,
        default=argparse.SUPPRESS,
        metavar="N",
        help="sharded mode: messages of one key at once",
    )
    parser.add_argument(
        "--fair-keys",
        choices=["on", "off"],
        default=argparse.SUPPRESS,
        help="queue mode: claims take the keys' messages round-robin",
    )
    parser.add_argument(
        "--tags",
        default=argparse.SUPPRESS,
        metavar="A,B",
        help="filter: only publishes whose tag is one of these",
    )
    parser.add_argument(
        "--expression",
        default=argparse.SUPPRESS,
        metavar="EXPR",
        help="filter: only publishes it matches, e.g. \"tag IN ('paid') AND region = 'eu'\"",
    )


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Add ``groups`` and its subcommands to the ``mqclient`` parser."""
    groups = commands.add_parser(
        "groups",
        help="manage a topic's groups (subscriptions)",
        description="Manage a topic's groups (its subscriptions). Changes need an admin token.",
    )
    actions = groups.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, help_text: str, *, group: bool = True) -> argparse.ArgumentParser:
        parser = actions.add_parser(name, parents=[common], help=help_text, description=help_text)
        parser.add_argument("topic")
        if group:
            parser.add_argument("group")
        return parser

    listing = action("list", "list a topic's groups with their state", group=False)
    listing.add_argument("--json", action="store_true", help="print JSON, not a table")
    action("show", "show one group's settings and state")
    create = action("create", "subscribe a new group to the topic")
    create.add_argument(
        "--start",
        default="latest",
        help="latest (default), earliest, or an ISO time: the publishes it receives",
    )
    create.add_argument("--paused", action="store_true", help="create it paused")
    create.add_argument("--exist-ok", action="store_true", help="an existing group is not an error")
    _add_limits(create)
    change = action("set", "change a group's mode, limits or filter")
    _add_limits(change)
    change.add_argument("--no-filter", action="store_true", help="remove the group's filter")
    action("pause", "stop deliveries to the group (produce still stores)")
    action("resume", "deliver to a paused group again")
    replay = action("replay", "copy the publishes since a time into the group again")
    replay.add_argument("--since", required=True, help="ISO time, e.g. 2026-11-25T08:00:00Z")
    delete = action("delete", "unsubscribe the group; its NEW messages are removed")
    delete.add_argument("--yes", action="store_true", help="confirm the deletion")


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    names = ("mode", "max_in_flight", "rate_per_second", "key_concurrency")
    found = {name: getattr(args, name) for name in names if hasattr(args, name)}
    if hasattr(args, "fair_keys"):
        found["fair_keys"] = args.fair_keys == "on"
    if found.get("mode") is None:
        found.pop("mode", None)
    if hasattr(args, "tags") or hasattr(args, "expression"):
        if hasattr(args, "tags") and hasattr(args, "expression"):
            raise UsageError("give --tags or --expression, not both")
        tags = [t.strip() for t in args.tags.split(",") if t.strip()] if hasattr(args, "tags") else None
        found["filter"] = subscription_filter(tags=tags, expression=getattr(args, "expression", None))
    if getattr(args, "no_filter", False):
        found["filter"] = None
    return found


def _table(rows: list[dict[str, Any]]) -> str:
    cells = [[heading for heading, _ in COLUMNS]]
    for row in rows:
        cells.append(["-" if row.get(key) is None else str(row.get(key)) for _, key in COLUMNS])
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def run(args: argparse.Namespace) -> int:
    """Run one ``groups`` action; API errors propagate to ``cli.main`` (one line, exit 2)."""
    if args.action == "delete" and not args.yes:
        raise UsageError(
            f"deleting group {args.group!r} removes its NEW messages and stops its copies; "
            "add --yes to confirm"
        )
    with Admin(brokers=args.brokers, token=args.token) as admin:
        groups = admin.groups
        if args.action == "list":
            rows = groups.list(args.topic)
            print(json.dumps(rows, indent=2) if args.json else _table(rows))
            return 0
        answer: Any
        if args.action == "show":
            answer = groups.get(args.topic, args.group)
        elif args.action == "create":
            settings = _settings(args)
            if args.paused:
                settings["paused"] = True
            spec = settings.pop("filter", None) or {}
            answer = groups.create(
                args.topic, args.group, start=args.start, exist_ok=args.exist_ok,
                tags=spec.get("tags"), expression=spec.get("expression"), **settings
            )
        elif args.action == "set":
            settings = _settings(args)
            if not settings:
                raise UsageError(
                    "nothing to set: give --mode, --max-in-flight, --rate, --key-concurrency, --tags, "
                    "--expression or --no-filter"
                )
            answer = groups.update(args.topic, args.group, **settings)
        elif args.action == "pause":
            answer = groups.pause(args.topic, args.group)
        elif args.action == "resume":
            answer = groups.resume(args.topic, args.group)
        elif args.action == "replay":
            answer = groups.replay(args.topic, args.group, args.since)
        else:
            groups.delete(args.topic, args.group)
            answer = {"deleted": True, "topic": args.topic, "group": args.group}
    print(json.dumps(answer, indent=2))
    return 0


def fail(message: str) -> int:
    print(f"mqclient: {message}", file=sys.stderr)
    return 2
