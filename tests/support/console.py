"""The console's cast: anonymous, a viewer of shop, an operator of another business line,
an operator of shop and a global admin; and shop's topic `orders` with a few messages."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from messages.models import Message, Status
from mqcenter.models import ConsoleGrant
from topics.models import Biz, Topic, TopicGroup

PASSWORD = "a-long-test-password-42"


def make_user(username: str, role: str | None = None, biz: Biz | None = None, superuser: bool = False) -> User:
    if superuser:
        user = User.objects.create_superuser(username, f"{username}@example.org", PASSWORD)
    else:
        user = User.objects.create_user(username, f"{username}@example.org", PASSWORD)
    if role:
        ConsoleGrant.objects.create(user=user, role=role, biz=biz)
    return user


def client_for(user: User | None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


@pytest.fixture
def other(db: Any) -> Biz:
    return Biz.objects.create(name="other")


@pytest.fixture
def orders(shop: Biz) -> Topic:
    topic = Topic.objects.create(name="orders", biz=shop, retry_count=2)
    TopicGroup.objects.create(topic=topic, name="billing")
    return topic


@pytest.fixture
def foreign_topic(other: Biz) -> Topic:
    return Topic.objects.create(name="payroll", biz=other)


def add_message(topic: str, status: str = Status.NEW, *, key: str | None = None, data: str = '{"n":1}',
                group: str = "billing", log: str = "") -> Message:
    now = timezone.now()
    return Message.objects.create(
        topic=topic, group_name=group, data=data, key=key, status=status, effect_time=now - timedelta(seconds=5),
        retry_remaining=0, attempt=1 if status != Status.NEW else 0, last_log=log, add_time=now, update_time=now,
    )


@pytest.fixture
def failed(orders: Topic) -> Message:
    return add_message("orders", Status.FAIL, key="order-42", data='{"order":42}', log="ValueError: bad sku\ntrace")


@pytest.fixture
def waiting(orders: Topic) -> Message:
    return add_message("orders", Status.NEW, key="order-43", data='{"order":43}')


@pytest.fixture
def users(shop: Biz, other: Biz) -> dict[str, User | None]:
    return {
        "anonymous": None,
        "viewer": make_user("vera", "viewer", shop),
        "outsider": make_user("otto", "operator", other),
        "operator": make_user("olga", "operator", shop),
        "admin": make_user("ada", "admin", None),
    }


@pytest.fixture
def clients(users: dict[str, User | None]) -> dict[str, Client]:
    return {name: client_for(user) for name, user in users.items()}
