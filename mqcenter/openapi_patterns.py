"""The patterns of the OpenAPI document's times and cron expressions, built to agree with
the server's validators (tests/mqcenter/test_openapi_patterns.py checks both ways):
- times: exact for RFC 3339 as `mqcenter.core.dates.parse_iso_datetime` reads it, a real
  calendar day included (29-31 in the months that have them, February 29th of leap years);
- cron: a superset, as croniter's syntax (names, L, W, #, ?, hashes) and its ranges cannot be
  said exactly by a regex: the description says what else the server checks.
"""

from __future__ import annotations

from typing import Any

# The database's years (2-9998): parse_iso_datetime refuses 1 and 9999.
_YEAR = r"(000[2-9]|00[1-9][0-9]|0[1-9][0-9]{2}|[1-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
# Gregorian leap years among them: divisible by 4, except centuries not divisible by 400.
_LEAP_YEAR = r"([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)"
_DATE = (rf"({_YEAR}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
         rf"|02-(0[1-9]|1[0-9]|2[0-8]))|{_LEAP_YEAR}-02-29)")
# RFC 3339 allows a lower-case t (the server reads it) and z (the server refuses it); any
# number of fraction digits (the server keeps six); no leap second (the server refuses 60).
_TIME = r"[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
DATETIME_BODY = _DATE + _TIME
DATETIME_PATTERN = f"^{DATETIME_BODY}$"
MAX_DATETIME_LENGTH = 64  # parse_iso_datetime reads no longer text
DATETIME_TEXT = ("An RFC 3339 date-time with an offset (2026-01-31T09:30:00Z), on a day that exists. The server "
                 "also reads other ISO 8601 spellings (a space for the T, no seconds, +0800); the document "
                 "promises RFC 3339 only.")
DATETIME: dict[str, Any] = {"type": "string", "format": "date-time", "pattern": DATETIME_PATTERN,
                            "maxLength": MAX_DATETIME_LENGTH}

# A search's time: empty (no filter) or a date-time as above. No `format`: it would refuse "".
QUERY_TIME: dict[str, Any] = {"type": "string", "pattern": f"^$|^{DATETIME_BODY}$", "maxLength": MAX_DATETIME_LENGTH,
                              "description": f"Empty: no filter. {DATETIME_TEXT}"}

# Five fields of croniter's characters, separated by ASCII white space (croniter splits on it
# only; a no-break space is not a separator), with white space around them (the server trims).
_CRON_SPACE = r"[ \t\n\r\f\v]"
_CRON_FIELD = r"[0-9A-Za-z_*?/,#()-]+"
CRON = rf"^{_CRON_SPACE}*{_CRON_FIELD}({_CRON_SPACE}+{_CRON_FIELD}){{4}}{_CRON_SPACE}*$"
CRON_TEXT = ("Five fields as croniter reads them: minute (0-59) hour (0-23) day-of-month (1-31, L, 15W) "
             "month (1-12, JAN-DEC) day-of-week (0-7, SUN-SAT, 5#3), each a number, name, *, ?, range a-b, "
             "list a,b or step /n. The pattern says the syntax only: the server checks each field's range "
             "and that the expression names a day that exists (0 0 30 2 * does not); a refusal is a 400 "
             "whose details.field is cron.")
