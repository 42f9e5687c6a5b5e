"""Transactions: half messages, as RocketMQ does them.

A producer stores a batch as PREPARED (never claimed), then commits or rolls it back; an open
transaction past its check time is asked about at its check URL by the check-back job, which
commits, rolls back or gives up. Owns the table `mq_transaction`.
"""
