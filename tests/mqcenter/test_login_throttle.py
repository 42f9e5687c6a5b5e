"""Console login throttling: password guessing is stopped, a typo is not punished forever."""

from __future__ import annotations

import uuid

import pytest
from django.test import Client

from mqcenter.core.login_throttle import MAX_FAILURES_PER_USERNAME
from tests.support.console import make_user

pytestmark = pytest.mark.django_db


PASSWORD = "correct horse battery"


def attempt(client: Client, username: str, password: str, address: str) -> int:
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address).status_code


def fresh_address() -> str:
    """An address no other run used: per-address failures outlive a test in the shared cache."""
    return "10." + ".".join(str(b) for b in uuid.uuid4().bytes[:3])


def superuser_named(prefix: str) -> str:
    """A fresh superuser whose password is PASSWORD; answers its username."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    user = make_user(name, superuser=True)
    user.set_password(PASSWORD)
    user.save()
    return name


def test_it_blocks_a_username_after_repeated_failed_logins_even_with_the_right_password() -> None:
    name = superuser_named("guessme")
    client = Client()

    address = fresh_address()
    failures = [attempt(client, name, f"wrong-{n}", address) for n in range(MAX_FAILURES_PER_USERNAME)]
    blocked = client.post("/login/", {"username": name, "password": PASSWORD}, REMOTE_ADDR=address)

    assert failures == [200] * MAX_FAILURES_PER_USERNAME  # the form again, with an error
    assert blocked.status_code == 429
    assert blocked["Retry-After"]
    assert "Too many failed logins" in blocked.content.decode()
    assert "_auth_user_id" not in client.session


def test_it_forgets_a_few_typos_after_a_successful_login() -> None:
    name = superuser_named("typo")
    client = Client()

    for n in range(MAX_FAILURES_PER_USERNAME - 1):
        attempt(client, name, f"wrong-{n}", fresh_address())
    ok = client.post("/login/", {"username": name, "password": PASSWORD}, REMOTE_ADDR=fresh_address())
    client.logout()
    address = fresh_address()
    again = [attempt(Client(), name, f"oops-{n}", address) for n in range(MAX_FAILURES_PER_USERNAME - 1)]

    assert ok.status_code == 302
    assert 429 not in again
