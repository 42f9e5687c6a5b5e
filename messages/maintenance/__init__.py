"""Maintenance bookkeeping: each beat job's last run, outcome and duration.

Every maintenance task runs its work through `runs.maintenance_run`, which records it; the
console's Maintenance page and the health checks read those rows. Owns the table
`mq_maintenance_run`.
"""
