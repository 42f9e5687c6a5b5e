"""Start-up checks of the reports' settings (Django system checks: every manage.py command,
runbroker and runreport included, prints them when it starts)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Warning, register


@register()
def report_mail_links_check(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """Report e-mails link to the console; without MQ_ADVERTISED_URL those links are relative
    and no mail client can open them."""
    if getattr(settings, "MQ_REPORT_EMAILS", None) and not getattr(settings, "MQ_ADVERTISED_URL", ""):
        return [Warning(
            "Report e-mails (MQ_REPORT_EMAILS, and topics' alarm addresses) link to the console, and "
            "MQ_ADVERTISED_URL is not set: the links are relative, so no mail client can open them.",
            hint="Set MQ_ADVERTISED_URL to the console's address as its readers reach it, "
                 "e.g. https://mq.example.com.",
            id="mq_reports.W001",
        )]
    return []
