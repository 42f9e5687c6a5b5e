"""Schedules: recurring messages.

A schedule produces one message to its topic (and group) on every tick of a cron expression
in a time zone; the beat's tick task produces the due ones with a per-tick dedup key, so two
beats never store a tick twice. Owns the table `mq_schedule`.
"""
