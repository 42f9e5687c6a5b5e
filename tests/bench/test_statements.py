"""`python -m bench.statements` counts what a request costs the database, and the hot requests
stay as lean as this session made them: a produce is one INSERT, committed on its own (no
transaction around it, no trace row, no dedup look-up, no autocommit switches); a pull is
four (its row holds the "pulled" event: no trace INSERT) and its ack five; and no request
pings the database to check its connection."""

from __future__ import annotations

import pytest

from bench import statements

pytestmark = pytest.mark.e2e

# The counters are server-wide: the broker's own registry heartbeat adds a little.
SLACK = 0.5


def test_a_produce_costs_one_statement_and_a_pull_and_ack_nine() -> None:
    counts = statements.measure(60)
    produce, pull_ack = counts["produce 1 message (with a dedup key)"], counts["pull 1 + ack 1"]
    # The INSERT alone: no trace row (the message row is its "produced" event), so no
    # transaction either.
    assert 1 <= produce["Questions"] <= 1 + SLACK, produce
    assert produce["Com_select"] < SLACK, produce  # new dedup keys are not looked up
    # BEGIN, SELECT ... FOR UPDATE SKIP LOCKED, UPDATE, COMMIT; BEGIN, SELECT ... FOR UPDATE,
    # UPDATE, INSERT of the "acked" trace row, COMMIT.
    assert 9 <= pull_ack["Questions"] <= 9 + SLACK, pull_ack
    for counts_of in (produce, pull_ack):
        assert counts_of["Com_set_option"] < SLACK, counts_of
        assert counts_of["Com_admin_commands"] < SLACK, counts_of  # pings
    assert round(produce["Com_begin"]) == 0 and round(pull_ack["Com_begin"]) == 2
