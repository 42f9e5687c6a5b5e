"""Every pull, ack, extend and release test of `test_consume`, served the way a broker
serves them: through the ASGI application, where pull and ack take the fast path
(mqcenter/fastpath.py) and its database work runs on other threads (so the data is
committed: transactional tests)."""

from __future__ import annotations

import pytest

from tests.api.test_consume import *  # noqa: F403
from tests.conftest import Api
from tests.support.asgi import AsgiClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _through_asgi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Api, "client_class", AsgiClient)
