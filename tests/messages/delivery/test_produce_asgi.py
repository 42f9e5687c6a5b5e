"""Every produce test of `test_produce`, served the way a broker serves them: through the
ASGI application, where produce takes the fast path (mqcenter/fastpath.py) and its
database work runs on other threads (so the data is committed: transactional tests)."""

from __future__ import annotations

import pytest

from tests.messages.delivery.test_produce import *  # noqa: F403

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("through_asgi")]
