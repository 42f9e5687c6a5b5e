"""A broker process's heartbeat: its row created at the first beat, updated by later ones."""

from __future__ import annotations

import pytest

from registry.models import BrokerNode
from registry.services import broker_heartbeat, broker_leave

pytestmark = pytest.mark.django_db


def test_beats_update_the_row_the_first_one_created_and_a_removed_row_comes_back() -> None:
    broker_heartbeat(node_id="n1", url="http://h:1", host="h", pid=1, waiting_pulls=3)
    first = BrokerNode.objects.get(node_id="n1")
    broker_heartbeat(node_id="n1", url="http://h:1", host="h", pid=1, waiting_pulls=7)
    again = BrokerNode.objects.get(node_id="n1")
    assert (again.started_at, again.waiting_pulls) == (first.started_at, 7)
    assert again.last_heartbeat > first.last_heartbeat
    broker_leave(node_id="n1")
    broker_heartbeat(node_id="n1", url="http://h:1", host="h", pid=1)
    back = BrokerNode.objects.get(node_id="n1")
    assert back.waiting_pulls == 0 and back.started_at > first.started_at
