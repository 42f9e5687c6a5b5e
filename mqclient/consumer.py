"""``@consumer``: declare a handler for a (topic, group); the runner does the rest.

    @consumer("orders", group="billing", concurrency=8, timeout=30)
    def charge(message: Message) -> None:
        ...

The (topic, group) pair is a subscription: every message published to the topic (produced
without a group) reaches the group once. The group is created by the consumer's first
registration (the broker's ``MQ_AUTO_CREATE_GROUPS``), from ``latest``: it receives what is
published from then on. ``start="earliest"`` (or a time) makes the runner create it first,
through ``POST /api/v1/topics/{topic}/groups``, replaying the retained history into it; a
group that exists already is used as it is. Creating a group takes an ``admin`` token.

Returning normally acks ``SUCCESS``; raising acks ``FAIL`` with the exception as the trace log
(retried per the topic's policy); raising :class:`~mqclient.errors.Reject` fails the message
for good. Decorating does not change the function: it can still be called and unit-tested
directly. An ``async def`` handler is run to completion on its worker thread.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mqclient.admin import Start, start_value
from mqclient.message import Message

TOPIC_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")

Handler = Callable[[Message], Any]


@dataclass(frozen=True)
class ConsumerSpec:
    """One subscription: which messages, which handler, how many at once, how long each.

    ``group=None`` and ``concurrency=None`` take the runner's defaults (``MQ_GROUP``,
    ``MQ_CONCURRENCY``). ``timeout=None`` enforces each message's own ``timeout_seconds``.
    ``prefetch`` extra messages may be pulled beyond the free slots to hide pull latency
    (default 0: never hold a message that cannot start). ``start`` (``"latest"``,
    ``"earliest"`` or an ISO time), when set, makes the runner create the group from there
    before it registers (see the module's docstring).
    """

    topic: str
    handler: Handler
    group: str | None = None
    concurrency: int | None = None
    timeout: float | None = None
    prefetch: int = 0
    start: str | None = None

    @property
    def name(self) -> str:
        module = getattr(self.handler, "__module__", "?")
        qualname = getattr(self.handler, "__qualname__", repr(self.handler))
        return f"{module}.{qualname}"


_registry: list[ConsumerSpec] = []
_registry_lock = threading.Lock()


def consumer(
    topic: str,
    group: str | None = None,
    *,
    concurrency: int | None = None,
    timeout: float | None = None,
    prefetch: int = 0,
    start: Start | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler of ``topic`` for ``group``.

    ``start`` (``"latest"``, ``"earliest"``, an ISO time or a ``datetime``) creates the group
    from there before the runner registers, unless the group exists already.
    """
    if not TOPIC_PATTERN.match(topic):
        raise ValueError(f"invalid topic name {topic!r}")
    if group is not None and not TOPIC_PATTERN.match(group):
        raise ValueError(f"invalid group name {group!r}")
    if concurrency is not None and concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    if timeout is not None and timeout <= 0:
        raise ValueError("timeout must be positive")
    if prefetch < 0:
        raise ValueError("prefetch must not be negative")
    start_text = None if start is None else start_value(start)

    def register(handler: Handler) -> Handler:
        spec = ConsumerSpec(
            topic=topic,
            handler=handler,
            group=group,
            concurrency=concurrency,
            timeout=timeout,
            prefetch=prefetch,
            start=start_text,
        )
        with _registry_lock:
            _registry.append(spec)
        return handler

    return register


def registered_consumers(module_names: list[str] | None = None) -> list[ConsumerSpec]:
    """Every registered spec, or only those whose handler lives in one of ``module_names``."""
    with _registry_lock:
        specs = list(_registry)
    if module_names is None:
        return specs
    wanted = set(module_names)
    return [spec for spec in specs if getattr(spec.handler, "__module__", None) in wanted]


def clear_registry() -> None:
    """Forget every registered consumer (for tests that declare consumers inline)."""
    with _registry_lock:
        _registry.clear()
