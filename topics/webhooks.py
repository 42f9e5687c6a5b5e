"""A topic's alarm webhook targets: where its alarms are posted besides e-mail, and in which
message format, with the secret its posts are signed with. Stored on the topic as
[{"url", "format", "secret"}]; delivered by messages/alarms/webhooks.py."""

from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import urlsplit

from mqcenter.core.errors import InvalidRequest
from mqcenter.core.outbound import allow_list, url_check

# generic: the alarm's fields as JSON; the others as the chat tool's incoming-webhook bot
# expects them.
WEBHOOK_FORMATS = ("generic", "slack", "dingtalk", "wecom")
MAX_WEBHOOKS = 10


def webhook_url_check(*, url: Any, field: str, biz: str | None = None) -> str:
    """`url` if alarms of a topic of business line `biz` may be posted to it: http(s), no
    control characters, a host and port MQ_ALARM_WEBHOOK_HOSTS allows that line."""
    return url_check(
        url=url, allowed=allow_list("MQ_ALARM_WEBHOOK_HOSTS"), biz=biz, field=field, what="webhook URL"
    ).url


def webhooks_validate(
    *, targets: Any, biz: str | None = None, field: str = "alarm_webhooks", saved: list[dict[str, str]] | None = None,
) -> list[dict[str, str]]:
    """The targets as stored ([{"url", "format", "secret"}]) for a topic of business line
    `biz`, or InvalidRequest naming the first bad field (`alarm_webhooks[1].url`). An empty
    list removes every target. Each target keeps the signing secret it has in `saved` (the
    topic's targets before), a new one gets its own (`webhook_secret_new`)."""
    secrets_by_url = {t["url"]: t["secret"] for t in saved or [] if t.get("secret")}
    if not isinstance(targets, list):
        raise InvalidRequest(f"{field} must be a list.", details={"field": field})
    if len(targets) > MAX_WEBHOOKS:
        raise InvalidRequest(
            f"At most {MAX_WEBHOOKS} webhook targets per topic.", details={"field": field}
        )
    clean: list[dict[str, str]] = []
    for index, target in enumerate(targets):
        where = f"{field}[{index}]"
        if not isinstance(target, dict):
            raise InvalidRequest(
                f"{where} must be an object with url and format.", details={"field": where}
            )
        fmt = target.get("format", "generic")
        if fmt not in WEBHOOK_FORMATS:
            raise InvalidRequest(
                f"{where}.format must be one of {', '.join(WEBHOOK_FORMATS)}.",
                details={"field": f"{where}.format"},
            )
        try:
            url = webhook_url_check(url=target.get("url"), field=f"{where}.url", biz=biz)
        except InvalidRequest as exc:  # say which target: a form shows only the message
            raise InvalidRequest(f"{where}.url: {exc.message}", details=exc.details) from exc
        if any(t["url"] == url for t in clean):
            raise InvalidRequest(f"{where}.url is listed twice.", details={"field": f"{where}.url"})
        clean.append({"url": url, "format": fmt, "secret": secrets_by_url.get(url) or webhook_secret_new()})
    return clean


def webhook_secret_new() -> str:
    """A webhook target's signing secret: each alarm post carries an HMAC-SHA256 of its
    timestamp and body under it (messages/alarms/webhooks.py `webhook_signature`)."""
    return f"whsec_{secrets.token_urlsafe(32)}"


def webhook_url_masked(url: str) -> str:
    """The URL without its path and query, where chat tools put the bot's secret: what
    anyone but the topic's admins is shown."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/…" if parts.path.strip("/") or parts.query else url
