"""A real local HTTP server answering the broker's transaction check-backs (the SDK's
`transaction_check_app`), for the tests: it answers from a dict the test fills."""

from __future__ import annotations

import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from mqclient import transaction_check_app


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class CheckServer:
    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.asked: list[str] = []

        def resolve(transaction_id: str) -> Any:
            self.asked.append(transaction_id)
            return self.answers.get(transaction_id)

        self.httpd = make_server("127.0.0.1", 0, transaction_check_app(resolve), handler_class=_Quiet)
        self.port = self.httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/mq-check"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> CheckServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
