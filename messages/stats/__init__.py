"""Counts without counting the hot table.

The flush job rolls the trace into per-minute buckets per (topic, group) with backlog
snapshots (`flush`), which the dashboard, the charts, the stats endpoint and the alarms read
(`selectors`, `api`); live counters in Redis keep the console's counts fresh within a second
between flushes (`live`: hints for display, never a decision). Owns the table
`mq_stats_bucket`.
"""
