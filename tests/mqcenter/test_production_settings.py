"""Production posture: deploy checks, rate limits, security headers."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse

from tests.conftest import Api, error_of

ROOT = Path(__file__).resolve().parents[2]


def test_it_passes_djangos_deploy_checks_with_production_settings() -> None:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "mqcenter.settings",
        "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
        "DJANGO_ALLOWED_HOSTS": "mq.example.com",
        "MQ_TLS": "1",
        "DATABASE_URL": "sqlite:///:memory:",
        "MQ_VAR_DIR": str(ROOT / "var" / "deploycheck"),
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


@pytest.mark.django_db
def test_it_answers_429_with_retry_after_when_a_token_exceeds_its_rate(admin_api: Api) -> None:
    rates = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"token": "3/min"}}
    with override_settings(REST_FRAMEWORK=rates):
        answers = [admin_api.get("/api/v1/topics") for _ in range(4)]
    assert [r.status_code for r in answers] == [200, 200, 200, 429]
    assert error_of(answers[3])["code"] == "rate_limited"
    assert int(answers[3]["Retry-After"]) >= 1


@pytest.mark.django_db
def test_it_sends_security_headers_on_api_and_console_responses(admin_api: Api, client: Any) -> None:
    console = client.get(reverse("console:login"))
    assert console.status_code == 200
    api = (admin_api.get("/api/v1/topics"), client.get("/healthz"))
    for response in (*api, console):
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["X-Frame-Options"] == "DENY"
        assert "default-src 'self'" in response["Content-Security-Policy"]
        assert "unsafe-inline" not in response["Content-Security-Policy"]
    # The API's policy is built once, from the same settings as the console's.
    assert {r["Content-Security-Policy"] for r in api} == {console["Content-Security-Policy"]}


@pytest.mark.django_db
@override_settings(CONTENT_SECURITY_POLICY_REPORT_ONLY={"DIRECTIVES": {"default-src": ["'self'"], "report-uri": "/csp"}})
def test_a_report_only_policy_reaches_api_and_console_answers(client: Any) -> None:
    console = client.get(reverse("console:login"))
    api = client.get("/healthz")
    assert "report-uri /csp" in console["Content-Security-Policy-Report-Only"]
    assert api["Content-Security-Policy-Report-Only"] == console["Content-Security-Policy-Report-Only"]
    assert api["Content-Security-Policy"] == console["Content-Security-Policy"]
