"""The acks' validation: the common all-success batch and every other shape parse alike."""

from __future__ import annotations

import pytest

from messages.delivery.acks import AckResult
from messages.delivery.validation import ack_results
from mqcenter.core.errors import InvalidRequest


def test_plain_successes_and_full_results_parse_alike():
    assert ack_results([{"id": 7, "status": "SUCCESS"}, {"status": "SUCCESS", "id": 2**63 - 1},
                        {"id": 8, "status": "SUCCESS", "log": "fine"}, {"id": 9, "status": "FAIL", "retry": False}]) == [
        AckResult(7, "SUCCESS"), AckResult(2**63 - 1, "SUCCESS"), AckResult(8, "SUCCESS", "fine"),
        AckResult(9, "FAIL", "", False)]


@pytest.mark.parametrize("bad_id", [True, 0, -1, 2**63, "7", 7.0, None])
def test_a_plain_success_with_a_bad_id_is_refused_naming_it(bad_id):
    with pytest.raises(InvalidRequest) as error:
        ack_results([{"id": 1, "status": "SUCCESS"}, {"id": bad_id, "status": "SUCCESS"}])
    assert error.value.details["field"] == "results[1].id"
