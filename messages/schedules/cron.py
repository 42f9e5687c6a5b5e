"""Five-field cron expressions (minute resolution) as schedules use them: what is wrong with
one, said precisely, and its next runs in a time zone."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from croniter import CroniterBadDateError, croniter

# (name, lowest, highest, names allowed in place of numbers)
FIELDS = (
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of month", 1, 31, ()),
    ("month", 1, 12, ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")),
    ("day of week", 0, 7, ("sun", "mon", "tue", "wed", "thu", "fri", "sat")),
)
_PART = re.compile(r"^(?:\*|(?P<a>[0-9a-z]+)(?:-(?P<b>[0-9a-z]+))?)(?:/(?P<step>[0-9]+))?$")


def cron_problem(cron: object) -> str | None:
    """What is wrong with `cron` as a five-field expression, or None when it is valid and
    fires on some real day: the field count, the field and value out of its range, or the
    part that is not cron syntax."""
    if not isinstance(cron, str) or not cron.strip():
        return "cron is required: five fields, minute hour day-of-month month day-of-week, e.g. '0 2 * * *'."
    if len(cron) > 200:
        return "cron is longer than 200 characters."
    parts = cron.split()
    if len(parts) != 5:
        return (f"cron has {len(parts)} field{'s' if len(parts) != 1 else ''}; it needs five: "
                "minute hour day-of-month month day-of-week, e.g. '0 2 * * *'.")
    valid = croniter.is_valid(cron)
    for text, (name, low, high, names) in zip(parts, FIELDS, strict=True):
        for item in text.lower().split(","):
            problem = _item_problem(item, name, low, high, names)
            # croniter's extensions (L, #, ?) are cron too: only a number out of range, or
            # what croniter refuses as well, is a problem.
            if problem and (not valid or "out of range" in problem):
                return problem
    if not valid:
        return f"cron {cron.strip()!r} is not a valid cron expression."
    try:  # a valid expression may still name no real day ("0 0 30 2 *": February 30th)
        croniter(cron.strip(), datetime(2000, 1, 1, tzinfo=UTC)).get_next(datetime)
    except (CroniterBadDateError, ValueError, OverflowError):
        return f"cron {cron.strip()!r} never fires: it names no day that exists."
    return None


def _item_problem(item: str, name: str, low: int, high: int, names: tuple[str, ...]) -> str | None:
    found = _PART.match(item)
    if not found:
        return f"cron {name} field {item!r} is not cron syntax (a number, a range a-b, a list a,b, * or a step */n)."
    for value in (found["a"], found["b"]):
        if value is None:
            continue
        if value.isdigit():
            if not low <= int(value) <= high:
                return f"cron {name} {value} is out of range: the {name} is {low} to {high}."
        elif value not in names:
            return f"cron {name} field {item!r}: {value!r} is not a number from {low} to {high}."
    if found["a"] and found["b"] and found["a"].isdigit() and found["b"].isdigit() and int(found["a"]) > int(found["b"]):
        return f"cron {name} range {item!r} runs backwards."
    if found["step"] is not None and not 1 <= int(found["step"]) <= high:
        return f"cron {name} step /{found['step']} must be from 1 to {high}."
    return None


def cron_next_runs(cron: str, zone: str, *, after: datetime, count: int = 5) -> list[datetime]:
    """The next `count` runs of a valid `cron` after `after`, in time zone `zone`."""
    runs = croniter(cron.strip(), after.astimezone(ZoneInfo(zone)))
    return [runs.get_next(datetime) for _ in range(count)]
