"""Command line: ``mqclient run MODULE...`` runs consumers; ``mqclient produce`` sends one;
``mqclient groups ...`` manages a topic's groups (see :mod:`mqclient.cli_groups`).

Options override the ``MQ_*`` environment variables (see :mod:`mqclient.config`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from mqclient import cli_groups
from mqclient.config import ClientConfig
from mqclient.consumer import registered_consumers
from mqclient.errors import APIError, MQClientError
from mqclient.logs import configure_logging


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mqclient", description="MQ Center Python client")
    commands = parser.add_subparsers(dest="command", required=True)

    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--brokers", help="comma-separated broker URLs (MQ_BROKERS)")
    common.add_argument("--token", help="API token (MQ_TOKEN)")

    run = commands.add_parser(
        "run", parents=[common], help="run the @consumer handlers of one or more modules"
    )
    run.add_argument("modules", nargs="+", help="modules to import, e.g. myapp.consumers")
    run.add_argument("--group", help="default group for handlers that name none (MQ_GROUP)")
    run.add_argument("--concurrency", type=int, help="default slots per handler (MQ_CONCURRENCY)")
    run.add_argument("--wait-seconds", type=int, help="long-poll length (MQ_WAIT_SECONDS)")
    run.add_argument("--grace", type=float, help="shutdown grace seconds (MQ_GRACE_SECONDS)")
    run.add_argument(
        "--websocket",
        action="store_true",
        default=None,
        help="use WebSocket push wake-ups (MQ_WEBSOCKET)",
    )
    run.add_argument("--log-format", choices=["json", "text"], help="MQ_LOG_FORMAT")
    run.add_argument("--log-level", help="MQ_LOG_LEVEL")

    produce = commands.add_parser("produce", parents=[common], help="produce one message")
    produce.add_argument("topic")
    produce.add_argument(
        "data", nargs="?", help="JSON value; a bare word goes as a string (default: read from stdin)"
    )
    produce.add_argument("--group")
    produce.add_argument("--key")
    produce.add_argument("--delay", type=float, help="seconds before it is deliverable")
    produce.add_argument("--dedup-key")
    produce.add_argument(
        "--header", action="append", default=[], type=_header, metavar="NAME=VALUE"
    )
    produce.add_argument(
        "--broadcast", action="store_true", help="one copy per group (what no --group does)"
    )
    cli_groups.add_parser(commands, common)
    return parser


def load_modules(names: Sequence[str]) -> None:
    """Import the consumer modules, from the current directory like ``python -m`` would."""
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    for name in names:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            # The module named on the command line (or its package): a usage error. A module
            # that its own imports fail inside keeps its traceback: that is the app's bug.
            if exc.name is None or not (name == exc.name or name.startswith(f"{exc.name}.")):
                raise
            raise cli_groups.UsageError(
                f"no module named {exc.name!r}: run from the directory that holds it, or put it on PYTHONPATH"
            ) from None


def _run(args: argparse.Namespace) -> int:
    from mqclient.runner import Runner

    config = ClientConfig.from_env(
        brokers=args.brokers,
        token=args.token,
        group=args.group,
        concurrency=args.concurrency,
        wait_seconds=args.wait_seconds,
        grace_seconds=args.grace,
        websocket=args.websocket,
        log_format=args.log_format,
        log_level=args.log_level,
    )
    configure_logging(config.log_format, config.log_level)
    load_modules(args.modules)
    runner = Runner(registered_consumers(), config=config)
    return runner.run()


def _header(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def _data(raw: str) -> Any:
    """The message data: the JSON value given, or a bare word as a JSON string (``mqclient
    produce orders hello``). Text that starts as JSON does (an object, an array, a quoted
    string) but does not parse is refused: a typo must not go out as a string."""
    if not raw.strip():
        raise cli_groups.UsageError("no data given: pass a JSON value, or pipe one to stdin")
    try:
        return json.loads(raw)
    except ValueError as exc:
        if raw.lstrip()[:1] in ("{", "[", '"'):
            raise cli_groups.UsageError(f"data is not valid JSON ({exc})") from None
        return raw


def _produce(args: argparse.Namespace) -> int:
    from mqclient.producer import Producer

    # From stdin without the line break `echo` ends it with.
    data = _data(args.data if args.data is not None else sys.stdin.read().rstrip("\r\n"))
    headers = dict(args.header)
    with Producer(brokers=args.brokers, token=args.token) as producer:
        if args.broadcast:
            copies = producer.broadcast(
                args.topic,
                data,
                key=args.key,
                delay=args.delay,
                dedup_key=args.dedup_key,
                headers=headers,
            )
        else:
            copies = list(
                producer.produce(
                    args.topic,
                    data,
                    group=args.group,
                    key=args.key,
                    delay=args.delay,
                    dedup_key=args.dedup_key,
                    headers=headers,
                ).copies
            )
    for copy in copies:  # one line per stored message: one per group for a publish
        fields = dataclasses.asdict(copy)
        del fields["copies"]
        print(json.dumps(fields))
    return 0


def describe(exc: BaseException) -> str:
    """One line for an error: the broker's message, its code and the field it names."""
    if isinstance(exc, APIError):
        where = f", field {exc.field}" if exc.field else ""
        return f"{exc.message} ({exc.code}, HTTP {exc.status}{where})"
    return str(exc)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mqclient`` console script and ``python -m mqclient``."""
    args = _parser().parse_args(argv)
    try:
        if args.command == "run":
            return _run(args)
        if args.command == "groups":
            return cli_groups.run(args)
        return _produce(args)
    except (MQClientError, cli_groups.UsageError, ValueError) as exc:
        return cli_groups.fail(describe(exc))
