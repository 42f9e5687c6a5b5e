"""A failed report run's error may quote topics and data of any line it read: it is shown
only to operators of every business line the run covered (global operators for a run over
every topic), never to viewers or to operators of another line."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from reports.models import ReportRun
from tests.support.console import make_user
from topics.models import Biz, Topic

SECRET = "Py4JJavaError: row {'data': 'SHOPSECRET-card-4111'}"


@pytest.fixture
def lines(db: Any) -> tuple[Biz, Biz]:
    shop, other = Biz.objects.create(name="shop"), Biz.objects.create(name="other")
    Topic.objects.create(name="orders", biz=shop)
    return shop, other


def failed_run(**params: Any) -> ReportRun:
    return ReportRun.objects.create(
        kind="trace", state=ReportRun.State.FAILED, error=SECRET, params=params
    )


def pages(user: Any, run: ReportRun) -> list[str]:
    client = Client()
    client.force_login(user)
    answers = [client.get("/reports/"), client.get(f"/reports/{run.id}/")]
    assert [a.status_code for a in answers] == [200, 200]
    return [a.content.decode() for a in answers]


def test_a_runs_error_is_shown_to_the_operators_of_its_lines(lines: tuple[Biz, Biz]) -> None:
    shop, _ = lines
    run = failed_run(topics=["orders"])

    for user in (make_user("ops", "operator", shop), make_user("root", superuser=True)):
        assert all("SHOPSECRET" in page for page in pages(user, run)), user


def test_a_runs_error_is_hidden_from_viewers_and_other_lines(lines: tuple[Biz, Biz]) -> None:
    shop, other = lines
    mine, everything = failed_run(topics=["orders"]), failed_run()

    for user in (make_user("viewer", "viewer", shop), make_user("rival", "operator", other)):
        for run in (mine, everything):
            shown = pages(user, run)
            assert not any("SHOPSECRET" in page for page in shown), user
            assert "The error is shown to operators" in shown[1]
    # A run over every topic may have read any line: only global operators see its error.
    assert "SHOPSECRET" not in pages(make_user("ops", "operator", shop), everything)[1]
