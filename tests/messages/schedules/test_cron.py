"""What is wrong with a cron expression, said precisely, and its next runs in a time zone."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from messages.schedules.cron import cron_next_runs, cron_problem


@pytest.mark.parametrize(("cron", "says"), [
    ("61 * * * *", "cron minute 61 is out of range: the minute is 0 to 59."),
    ("0 24 * * *", "cron hour 24 is out of range: the hour is 0 to 23."),
    ("0 0 0 * *", "cron day of month 0 is out of range: the day of month is 1 to 31."),
    ("0 0 * 13 *", "cron month 13 is out of range: the month is 1 to 12."),
    ("0 0 * * 8", "cron day of week 8 is out of range: the day of week is 0 to 7."),
    ("1 2 3", "cron has 3 fields; it needs five"),
    ("0 0 30 2 *", "never fires: it names no day that exists"),
    ("x * * * *", "cron minute field 'x'"),
])
def test_it_says_what_is_wrong_with_a_cron(cron: str, says: str) -> None:
    problem = cron_problem(cron)
    assert problem is not None and says in problem, problem


@pytest.mark.parametrize("cron", ["0 2 * * *", "*/5 * * * *", "0 0 L * *", "0 9 * jan mon-fri", "5-1 * * * *"])
def test_it_accepts_what_croniter_runs(cron: str) -> None:
    assert cron_problem(cron) is None


def test_it_lists_the_next_runs_in_the_time_zone() -> None:
    runs = cron_next_runs("30 9 * * 1-5", "Asia/Shanghai", after=datetime(2026, 11, 27, 12, 0, tzinfo=UTC))
    assert [r.strftime("%Y-%m-%d %H:%M %z") for r in runs] == [
        "2026-11-30 09:30 +0800", "2026-12-01 09:30 +0800", "2026-12-02 09:30 +0800",
        "2026-12-03 09:30 +0800", "2026-12-04 09:30 +0800"]
