"""Login throttling counts before it checks, the admin has no login of its own, and a broker
with its own database refuses to start without a secret key."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.test import Client

from mqcenter.core.login_throttle import MAX_FAILURES_PER_USERNAME
from tests.support.console import make_user

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.django_db(transaction=True)
def test_concurrent_wrong_passwords_are_checked_no_more_often_than_the_limit() -> None:
    name = f"target-{uuid.uuid4().hex[:8]}"
    make_user(name, superuser=True)
    guesses = 24
    start = threading.Barrier(guesses)
    answers: list[bytes] = []

    def guess(n: int) -> None:
        client = Client()
        start.wait()
        response = client.post("/login/", {"username": name, "password": f"wrong-{n}"},
                               REMOTE_ADDR=f"10.9.{n}.1")
        answers.append(response.content)

    threads = [threading.Thread(target=guess, args=(n,)) for n in range(guesses)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    checked = [a for a in answers if b"Too many failed logins" not in a]
    assert len(answers) == guesses
    assert len(checked) <= MAX_FAILURES_PER_USERNAME


def test_the_admin_signs_in_through_the_console_login(client: Client) -> None:
    response = client.get("/admin/login/")

    assert response.status_code in (301, 302)
    assert response["Location"] == "/login/?next=/admin/"


def test_a_broker_with_its_own_database_refuses_to_start_without_a_secret_key(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SECRET_KEY", "DJANGO_DEBUG")}
    env.update({"DJANGO_SETTINGS_MODULE": "mqcenter.settings", "DATABASE_URL": "sqlite:///:memory:",
                "MQ_VAR_DIR": str(tmp_path)})
    result = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env,
                            capture_output=True, text=True, timeout=120)

    assert result.returncode != 0
    assert "Set DJANGO_SECRET_KEY" in result.stderr
    assert not (tmp_path / "secret_key").exists()


@pytest.mark.django_db
def test_an_edit_obeys_the_data_size_limit(admin_api: Any, producer_api: Any) -> None:
    from django.test import override_settings

    from messages.models import Message
    from tests.support.api import produce

    [stored] = produce(producer_api, {"topic": "orders", "data": 1})
    with override_settings(MQ_MAX_DATA_BYTES=1000):
        response = admin_api.patch(f"/api/v1/messages/{stored['id']}", {"data": "x" * 2000})

    assert response.status_code == 413 and response.json()["error"]["details"]["field"] == "data"
    assert Message.objects.get(id=stored["id"]).data == "1"


@pytest.mark.django_db
@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/topics/\r\nSet-Cookie: x=1"])
def test_a_pause_with_a_foreign_or_broken_next_goes_home_and_pauses(target: str) -> None:
    from django.test import Client

    from topics.models import Biz, Topic

    shop = Biz.objects.create(name="shop")
    Topic.objects.create(name="orders", biz=shop)
    client = Client()
    client.force_login(make_user(f"adm-{uuid.uuid4().hex[:6]}", "admin", shop))

    response = client.post("/topics/orders/pause/", {"paused": "1", "next": target})

    assert response.status_code == 303 and response["Location"] == "/topics/"
    assert Topic.objects.get(name="orders").paused
