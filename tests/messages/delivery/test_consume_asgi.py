"""Every pull, ack, extend and release test of `test_consume`, served the way a broker
serves them: through the ASGI application, where pull and ack take the fast path
(mqcenter/fastpath.py) and its database work runs on other threads (so the data is
committed: transactional tests)."""

from __future__ import annotations

import pytest

from tests.messages.delivery.test_consume import *  # noqa: F403

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("through_asgi")]
