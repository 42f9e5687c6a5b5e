"""Transactional (half) messages: prepare, do the local work, then commit or roll back.

    with producer.transaction(check_url="https://app/mq-check") as tx:
        tx.produce("orders", {"order": 42})      # stored PREPARED: no consumer sees it yet
        save_order(42, mq_transaction=tx.transaction_ids[0])
    # left without an exception: committed; with one: rolled back (and re-raised)

If the process dies before the commit, the broker asks ``check_url`` about each open
transaction; :func:`transaction_check_app` answers from the app's own records.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from mqclient.message import ProducedMessage

if TYPE_CHECKING:
    from mqclient.transport import Transport

CHECK_STATES = ("commit", "rollback", "unknown")


class ProducerTransaction:
    """One or more prepared batches, committed or rolled back together on leaving the
    ``with`` block. Each ``produce``/``produce_many`` call is one broker transaction; its id
    is appended to ``transaction_ids`` as soon as the batch is stored."""

    def __init__(self, transport: Transport, *, auto_dedup: bool, check_url: str, check_after_seconds: int = 30) -> None:
        self.transport, self.auto_dedup = transport, auto_dedup
        self.spec = {"check_url": check_url, "check_after_seconds": check_after_seconds}
        self.transaction_ids: list[str] = []
        self.finished = False

    def produce(self, topic: str, data: Any, **fields: Any) -> ProducedMessage:
        """Prepare one message (``Producer.produce``'s keywords)."""
        return self.produce_many([{"topic": topic, "data": data, **fields}])[0]

    def produce_many(self, messages: Iterable[Mapping[str, Any]]) -> list[ProducedMessage]:
        """Prepare a batch (at most one produce call's worth) as one broker transaction."""
        from mqclient.outgoing import message_from_mapping
        from mqclient.receipts import receipts

        if self.finished:
            raise RuntimeError("this transaction is already committed or rolled back")
        outs = [message_from_mapping(item, auto_dedup=self.auto_dedup) for item in messages]
        answer = self.transport.call(
            "POST", "/api/v1/messages",
            json={"messages": [out.body for out in outs], "transaction": self.spec},
        )
        self.transaction_ids.append(answer["transaction_id"])
        return receipts(answer, outs)

    def commit(self) -> None:
        self._finish("commit")

    def rollback(self) -> None:
        self._finish("rollback")

    def _finish(self, action: str) -> None:
        if self.finished:
            return
        for transaction_id in self.transaction_ids:
            self.transport.call("POST", f"/api/v1/transactions/{transaction_id}/{action}")
        self.finished = True

    def __enter__(self) -> ProducerTransaction:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *rest: object) -> None:
        if exc_type is None:
            self.commit()
        else:
            self.rollback()


def transaction_check_app(resolve: Callable[[str], str | bool | None]) -> Callable[..., Iterable[bytes]]:
    """A WSGI app answering the broker's check-backs: ``resolve(transaction_id)`` looks the
    transaction up in the app's own records and returns ``"commit"``, ``"rollback"`` or
    ``"unknown"`` (also ``True`` / ``False`` / ``None``)."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _answer(start_response, "405 Method Not Allowed", {"error": "POST only"})
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
            body = json.loads(environ["wsgi.input"].read(min(length, 64 * 1024)) or b"{}")
            transaction_id = body["transaction_id"]
            if not isinstance(transaction_id, str):
                raise TypeError("transaction_id must be a string")
        except (ValueError, KeyError, TypeError) as exc:
            return _answer(start_response, "400 Bad Request", {"error": str(exc)})
        answer = resolve(transaction_id)
        if answer is True or answer is False or answer is None:
            state = {True: "commit", False: "rollback", None: "unknown"}[answer]
        else:
            state = answer if answer in CHECK_STATES else "unknown"
        return _answer(start_response, "200 OK", {"state": state})

    return app


def _answer(start_response: Callable[..., Any], status: str, body: dict[str, Any]) -> list[bytes]:
    payload = json.dumps(body).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(payload)))])
    return [payload]
