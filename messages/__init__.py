"""Messages and everything done with them.

The delivery core (`delivery/`: produce, claims, pull, lifecycle, acks, retry, expiry, trace)
owns `mq_message` and `mq_message_trace`; each capability with tables and pages of its own is a
sub-package beside it (`operations/`, `archive/`, `schedules/`, `transactions/`, `alarms/`,
`stats/`, `maintenance/`); the modules here are about one message or any message (search,
detail, edit, subscriptions). docs/architecture.md walks through them.
"""
