"""Prometheus metrics of this broker process (each process exposes its own)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

registry = CollectorRegistry(auto_describe=True)

produced = Counter("mq_messages_produced", "Messages stored by produce", ["topic"], registry=registry)
duplicates = Counter("mq_messages_duplicate", "Produce items answered from dedup", ["topic"], registry=registry)
delivered = Counter("mq_messages_delivered", "Messages claimed by consumers", ["topic", "group"], registry=registry)
acked = Counter("mq_acks", "Ack results by outcome", ["outcome"], registry=registry)
leases_expired = Counter("mq_leases_expired", "Leases recovered by the broker", registry=registry)
expired = Counter("mq_messages_expired", "Messages that expired undelivered (EXPIRED)", registry=registry)
pull_wait = Histogram(
    "mq_pull_seconds", "Time a pull spent until it answered",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30), registry=registry,
)
waiting_pulls = Gauge("mq_waiting_pulls", "Long-polls waiting in this process", registry=registry)
