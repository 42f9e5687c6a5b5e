"""Console login throttling: password guessing is stopped, a typo is not punished forever."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from mqcenter.login_throttle import MAX_FAILURES_PER_USERNAME

from .conftest import make_user

pytestmark = pytest.mark.django_db


def attempt(client: Client, username: str, password: str, address: str = "10.9.8.7") -> int:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address).status_code


def test_it_blocks_a_username_after_repeated_failed_logins_even_with_the_right_password() -> None:
    name = f"guessme-{uuid.uuid4().hex[:8]}"
    user = make_user(name, superuser=True)
    user.set_password("correct horse battery")
    user.save()
    client = Client()

    failures = [attempt(client, name, f"wrong-{n}") for n in range(MAX_FAILURES_PER_USERNAME)]
    blocked = client.post("/login/", {"username": name, "password": "correct horse battery"}, REMOTE_ADDR="10.9.8.7")

    assert failures == [200] * MAX_FAILURES_PER_USERNAME  # the form again, with an error
    assert blocked.status_code == 429
    assert blocked["Retry-After"]
    assert "Too many failed logins" in blocked.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_forgets_a_few_typos_after_a_successful_login() -> None:
    name = f"typo-{uuid.uuid4().hex[:8]}"
    user = make_user(name, superuser=True)
    user.set_password("correct horse battery")
    user.save()
    client = Client()

    for n in range(MAX_FAILURES_PER_USERNAME - 1):
        attempt(client, name, f"wrong-{n}", address=f"10.1.1.{n}")
    ok = client.post("/login/", {"username": name, "password": "correct horse battery"}, REMOTE_ADDR="10.1.2.1")
    client.logout()
    again = [attempt(Client(), name, f"oops-{n}", address="10.1.3.1") for n in range(MAX_FAILURES_PER_USERNAME - 1)]

    assert ok.status_code == 302
    assert 429 not in again
