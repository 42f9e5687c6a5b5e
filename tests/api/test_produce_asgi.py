"""Every produce test of `test_produce`, served the way a broker serves them: through the
ASGI application, where produce takes the fast path (mqcenter/fastpath.py) and its
database work runs on other threads (so the data is committed: transactional tests)."""

from __future__ import annotations

import pytest

from tests.api.test_produce import *  # noqa: F403
from tests.conftest import Api
from tests.support.asgi import AsgiClient

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _through_asgi(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Api, "client_class", AsgiClient)
