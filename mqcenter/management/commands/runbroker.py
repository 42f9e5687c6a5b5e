"""Run a broker process: the ASGI app (REST API, long-polls, WebSockets) under uvicorn.

`manage.py runbroker --host 0.0.0.0 --port 8000 [--workers N]`. Each worker process
registers itself in the registry under the advertised URL (MQ_ADVERTISED_URL, or
http://<host>:<port>) so clients can discover and fail over between brokers.
"""

from __future__ import annotations

import argparse
import os
import socket
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


def tcp_port(text: str) -> int:
    """`--port`'s type: 1-65535. The socket layer would take 99999 as 34463 (modulo 65536)
    and 0 as any free port, and every address printed with the port would be wrong."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not a TCP port (1-65535)")
    return port


def port_problem(host: str, port: int) -> str | None:
    """Why the broker cannot listen on host:port (taken, not an address of this machine),
    or None. Binds as uvicorn does (SO_REUSEADDR: a port left in TIME_WAIT is free), then
    lets go at once."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"{host} is not an address of this machine ({exc.strerror})"
    family, kind, proto, _name, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            return f"port {port} on {host} is not free ({exc.strerror}): choose another with --port"
    return None


class Command(BaseCommand):
    help = "Serve the broker (ASGI, uvicorn)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument("--port", type=tcp_port, default=8000)
        parser.add_argument("--workers", type=int, default=1)
        parser.add_argument("--log-level", default="warning")

    def handle(self, *args: Any, **options: Any) -> None:
        import uvicorn

        host, port = options["host"], options["port"]
        problem = port_problem(host, port)
        if problem:
            raise CommandError(problem)
        advertised_host = socket.gethostname() if host in ("0.0.0.0", "::") else host  # noqa: S104
        os.environ.setdefault("MQ_ADVERTISED_URL", f"http://{advertised_host}:{port}")
        uvicorn.run(
            "mqcenter.asgi:application",
            host=host,
            port=port,
            workers=options["workers"],
            log_level=options["log_level"],
            lifespan="on",
            # X-Forwarded-For and -Proto are decided in one place, mqcenter/core/proxies.py
            # (believed only from MQ_TRUSTED_PROXIES): uvicorn passes them through untouched.
            proxy_headers=False,
            timeout_graceful_shutdown=5,
            # uvicorn formats each access-log line's fields before the logger drops it at the
            # default level: ~5% of the event loop's time answering a thousand long-polls
            # (py-spy during `python -m bench longpoll`). And no "server: uvicorn" header on
            # every answer.
            access_log=options["log_level"] in ("info", "debug", "trace"),
            server_header=False,
        )
