"""Managing a topic's groups (its subscriptions) from Python: ``Admin().groups``.

    from mqclient import Admin

    with Admin() as admin:                                 # MQ_BROKERS / MQ_TOKEN from env
        admin.groups.create("orders", "audit", start="earliest")
        admin.groups.pause("orders", "audit")
        admin.groups.get("orders", "audit")["backlog"]

Every call is one REST call of API.md "Subscriptions" and returns the broker's answer (a
group's state as a dict). Changing a group takes an ``admin`` token; reading one takes any
scope on its topic. Errors are the SDK's typed ones (:class:`~mqclient.errors.APIError`
subclasses): an unknown topic or group raises ``NotFound``, a taken name ``Conflict``, a bad
setting ``InvalidRequest`` naming the field in ``.field``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from mqclient.config import ClientConfig
from mqclient.errors import Conflict, MQClientError, NotFound
from mqclient.transport import Transport

logger = logging.getLogger("mqclient.admin")

#: What ``start`` may be besides a time.
START_WORDS = ("latest", "earliest")

Start = str | datetime


def start_value(start: Start) -> str:
    """A group's ``start`` as the API takes it: ``latest``, ``earliest`` or an ISO time.

    A naive ``datetime`` (or ISO string without offset) is taken as UTC. Raises ``ValueError``
    for anything else, so a typo fails where it was written rather than at the broker.
    """
    if isinstance(start, datetime):
        moment = start
    elif start in START_WORDS:
        return start
    else:
        try:
            moment = datetime.fromisoformat(str(start).replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f'start must be "latest", "earliest" or an ISO 8601 time, got {start!r}'
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.isoformat()


def _path(topic: str, group: str | None = None, action: str | None = None) -> str:
    path = f"/api/v1/topics/{quote(topic, safe='')}/groups"
    if group is not None:
        path += f"/{quote(group, safe='')}"
    if action is not None:
        path += f"/{action}"
    return path


def subscription_filter(*, tags: Iterable[str] | None = None, expression: str | None = None) -> dict[str, Any]:
    """A group's filter as the broker takes it: ``{"tags": [...]}`` or ``{"expression": ...}``."""
    if (tags is None) == (expression is None):
        raise ValueError("give tags or expression, not both")
    return {"tags": list(tags)} if tags is not None else {"expression": expression}


class Groups:
    """The REST calls on a topic's groups, over a :class:`~mqclient.transport.Transport`."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def list(self, topic: str) -> list[dict[str, Any]]:
        """Every group of ``topic`` with its settings and state."""
        return list(self.transport.call("GET", _path(topic)) or [])

    def get(self, topic: str, group: str) -> dict[str, Any]:
        """One group's settings and state: ``backlog``, ``in_flight``, ``dead``,
        ``oldest_age_seconds``, ``consumers_online``, ``last_pull_at``, ..."""
        return dict(self.transport.call("GET", _path(topic, group)))

    def create(
        self,
        topic: str,
        group: str,
        *,
        start: Start = "latest",
        mode: str | None = None,
        paused: bool | None = None,
        max_in_flight: int | None = None,
        rate_per_second: float | None = None,
        key_concurrency: int | None = None,
        fair_keys: bool | None = None,
        exist_ok: bool = False,
        tags: Iterable[str] | None = None,
        expression: str | None = None,
    ) -> dict[str, Any]:
        """Subscribe ``group`` to ``topic``. ``start``: ``"latest"`` (publishes from now),
        ``"earliest"`` (every retained publish) or a time (publishes since then).

        ``tags`` or ``expression`` (not both) set the subscription's filter: the group gets
        only the publishes whose tag is one of ``tags``, or that ``expression`` (over ``tag``
        and headers, e.g. ``"tag IN ('paid') AND region = 'eu'"``) matches.

        Returns the group's state, or ``{"job": id, "group": ...}`` when the broker replays a
        large history in the background. With ``exist_ok``, a group that already exists is not
        an error: its state is returned unchanged (its start is not replayed again).
        """
        body: dict[str, Any] = {"group": group, "start": start_value(start)}
        settings = {
            "mode": mode,
            "paused": paused,
            "max_in_flight": max_in_flight,
            "rate_per_second": rate_per_second,
            "key_concurrency": key_concurrency,
            "fair_keys": fair_keys,
        }
        body.update({name: value for name, value in settings.items() if value is not None})
        if tags is not None or expression is not None:
            body["filter"] = subscription_filter(tags=tags, expression=expression)
        try:
            return dict(self.transport.call("POST", _path(topic), json=body))
        except Conflict:
            if not exist_ok:
                raise
            return self.get(topic, group)

    def update(self, topic: str, group: str, **changes: Any) -> dict[str, Any]:
        """Change settings (``mode``, ``paused``, ``max_in_flight``, ``rate_per_second``,
        ``key_concurrency``, ``fair_keys``, ``filter``: see ``subscription_filter``); ``None`` lifts a limit
        or removes the filter. Returns the group's new state."""
        return dict(self.transport.call("PATCH", _path(topic, group), json=changes))

    def pause(self, topic: str, group: str) -> dict[str, Any]:
        """Stop deliveries to the group (its pulls answer empty); produce still stores."""
        return self.update(topic, group, paused=True)

    def resume(self, topic: str, group: str) -> dict[str, Any]:
        """Deliver to a paused group again."""
        return self.update(topic, group, paused=False)

    def replay(self, topic: str, group: str, since: Start) -> dict[str, Any]:
        """Copy the topic's publishes since ``since`` into the group again (re-processing).
        Returns the group's state, or ``{"job": id, ...}`` for a large replay."""
        body = {"since": start_value(since)}
        if body["since"] in START_WORDS:
            raise ValueError("since must be a time")
        return dict(self.transport.call("POST", _path(topic, group, "replay"), json=body))

    def delete(self, topic: str, group: str) -> None:
        """Unsubscribe the group: its NEW messages are removed, later publishes skip it."""
        self.transport.call("DELETE", _path(topic, group))


def ensure_group(groups: Groups, topic: str, group: str, start: Start) -> dict[str, Any] | None:
    """Create ``group`` from ``start`` unless it exists (what a consumer with ``start=`` does
    before its first registration, which would otherwise create the group from ``latest``).

    A topic that does not exist yet is created first, so that no publish can land between the
    two without reaching the group. Returns the broker's answer, ``None`` if the group existed.
    """
    try:
        return groups.create(topic, group, start=start)
    except Conflict:
        return None
    except NotFound:
        with contextlib.suppress(Conflict):  # created meanwhile by someone else: fine
            groups.transport.call("POST", "/api/v1/topics", json={"topic": topic})
    try:
        return groups.create(topic, group, start=start)
    except Conflict:
        return None


def create_groups(groups: Groups, wanted: Iterable[tuple[str, str, str]]) -> bool:
    """Ensure each ``(topic, group, start)`` as :func:`ensure_group` does, logging what
    happened. False (after logging why) when one could not be created: a consumer that went
    on would get a group created from ``latest`` and silently miss the history it asked for."""
    for topic, group, start in wanted:
        try:
            answer = ensure_group(groups, topic, group, start)
        except MQClientError as exc:
            logger.error(
                "could not create group %s of topic %s from %s: %s", group, topic, start, exc
            )
            return False
        if answer is None:
            logger.info("group %s of topic %s exists: start %s not applied", group, topic, start)
        else:
            job = f" (replay job {answer['job']})" if "job" in answer else ""
            logger.info("group %s of topic %s created from %s%s", group, topic, start, job)
    return True


class Admin:
    """A client for the management calls; ``groups`` manages subscriptions.

    ``brokers`` and ``token`` default to ``MQ_BROKERS`` / ``MQ_TOKEN``.
    """

    def __init__(
        self,
        brokers: Iterable[str] | str | None = None,
        token: str | None = None,
        *,
        config: ClientConfig | None = None,
        transport: Transport | None = None,
    ) -> None:
        self.config = config or ClientConfig.from_env(brokers=brokers, token=token)
        self._owns_transport = transport is None
        self.transport = transport or self.config.new_transport()
        self.groups = Groups(self.transport)

    def close(self) -> None:
        """Release pooled connections."""
        if self._owns_transport:
            self.transport.close()

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
