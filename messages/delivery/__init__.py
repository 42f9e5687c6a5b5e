"""The delivery core: a message from produce to ack.

Produce stores a batch durably (copied to every subscribed group) and wakes the waiting pulls
after its commit (`produce`); a pull is one claim attempt of a long-poll (`pull`), a claim
leases a group's next messages in one short transaction, one module per delivery mode
(`claims/`); every state change of a message (lease, succeed, fail with retry or dead letter,
snooze, release, extend, lease recovery) is in `lifecycle`, acks and lease extensions in `acks`,
retry delays in `retry`, expiry in `expiry`, a dedup key's window in `dedup`, trace rows in
`trace` (and how the console words them in `trace_display`), and the hot path's SQL in
`sql` (claims, locks, leases), `sql_many` (many rows and owners at once) and `sql_insert`
(multi-row inserts). The doors: `api` (produce, pull, ack, extend, release), `validation`
(their request bodies), `answers` (their answers, built without serializers). Owns the tables
`mq_message` and `mq_message_trace` (messages/models.py).
"""
