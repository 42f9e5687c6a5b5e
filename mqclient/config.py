"""Client configuration: explicit arguments first, then ``MQ_*`` environment variables.

Every knob a deployment may want to turn without touching code is readable from the
environment, so the same consumer module runs on a laptop and in a container:

========================  =====================================================  =========
variable                  meaning                                                 default
========================  =====================================================  =========
``MQ_BROKERS``            comma-separated broker base URLs                        (required)
``MQ_TOKEN``              API token (``Authorization: Bearer``)                   none
``MQ_GROUP``              default consumer group of ``@consumer``                 default
``MQ_CONCURRENCY``        default handler slots per subscription                  4
``MQ_WAIT_SECONDS``       long-poll length of one pull                            10
``MQ_GRACE_SECONDS``      shutdown grace for in-flight handlers                   30
``MQ_REQUEST_TIMEOUT``    HTTP timeout of one non-poll request, seconds           10
``MQ_RETRY_DEADLINE``     how long a call keeps retrying transient failures, s    60
``MQ_WEBSOCKET``          ``1`` to use WebSocket push wake-ups                    0
``MQ_LOG_FORMAT``         ``json`` or ``text`` (runner logs)                      json
``MQ_LOG_LEVEL``          logging level of the runner                             INFO
========================  =====================================================  =========
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from mqclient.errors import ConfigurationError
from mqclient.transport import Transport

DEFAULT_GROUP = "default"


def _env_int(env: Mapping[str, str], name: str, default: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be an integer, got {raw!r}") from exc


def _env_float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name} must be a number, got {raw!r}") from exc


def _env_bool(env: Mapping[str, str], name: str, default: bool) -> bool:
    raw = env.get(name, "").strip().lower()
    if not raw:
        return default
    return raw in {"1", "true", "yes", "on"}


def parse_brokers(value: str | Iterable[str] | None) -> list[str]:
    """Normalise a broker list: split a comma string, strip blanks and trailing slashes.

    A bare ``host:port`` gets ``http://`` so that ``MQ_BROKERS=127.0.0.1:8000`` just works.
    """
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    brokers: list[str] = []
    for item in items:
        url = item.strip().rstrip("/")
        if not url:
            continue
        if "://" not in url:
            url = f"http://{url}"
        if url not in brokers:
            brokers.append(url)
    return brokers


@dataclass(frozen=True)
class ClientConfig:
    """Settings shared by the producer, the runner and the transport."""

    brokers: list[str] = field(default_factory=list)
    token: str | None = None
    group: str = DEFAULT_GROUP
    concurrency: int = 4
    wait_seconds: int = 10
    grace_seconds: float = 30.0
    request_timeout: float = 10.0
    retry_deadline: float = 60.0
    websocket: bool = False
    log_format: str = "json"
    log_level: str = "INFO"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> ClientConfig:
        """Build a config from ``env`` (default ``os.environ``), then apply non-None overrides."""
        env = os.environ if env is None else env
        config = cls(
            brokers=parse_brokers(env.get("MQ_BROKERS")),
            token=env.get("MQ_TOKEN") or None,
            group=env.get("MQ_GROUP") or DEFAULT_GROUP,
            concurrency=_env_int(env, "MQ_CONCURRENCY", 4),
            wait_seconds=_env_int(env, "MQ_WAIT_SECONDS", 10),
            grace_seconds=_env_float(env, "MQ_GRACE_SECONDS", 30.0),
            request_timeout=_env_float(env, "MQ_REQUEST_TIMEOUT", 10.0),
            retry_deadline=_env_float(env, "MQ_RETRY_DEADLINE", 60.0),
            websocket=_env_bool(env, "MQ_WEBSOCKET", False),
            log_format=(env.get("MQ_LOG_FORMAT") or "json").lower(),
            log_level=(env.get("MQ_LOG_LEVEL") or "INFO").upper(),
        )
        given = {name: value for name, value in overrides.items() if value is not None}
        if "brokers" in given:
            given["brokers"] = parse_brokers(given["brokers"])
        return replace(config, **given)

    def require_brokers(self) -> list[str]:
        """The broker list, or a clear error naming the variable to set."""
        if not self.brokers:
            raise ConfigurationError(
                "no broker URL: pass brokers=[...] or set MQ_BROKERS=http://host:port[,...]"
            )
        return list(self.brokers)

    def new_transport(self) -> Transport:
        """A transport to this configuration's brokers (its owner closes it)."""
        return Transport(
            self.require_brokers(),
            self.token,
            request_timeout=self.request_timeout,
            retry_deadline=self.retry_deadline,
        )
