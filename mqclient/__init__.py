"""MQ Center Python SDK: one line to produce, one decorator to consume.

    from mqclient import Producer, consumer, Message

    Producer().produce("orders", {"order": 42})          # to every subscribed group

    @consumer("orders", group="billing", concurrency=8)  # subscribes group billing
    def charge(message: Message) -> None: ...

    Admin().groups.create("orders", "audit", start="earliest")   # MQ_BROKERS / MQ_TOKEN

Run consumers with ``mqclient run myapp.consumers`` (or ``python -m mqclient run ...``).
The package talks to the brokers over the REST contract only and imports nothing from Django.
"""

from __future__ import annotations

from mqclient.admin import Admin, Groups
from mqclient.batching import BatchingProducer
from mqclient.config import ClientConfig
from mqclient.consumer import ConsumerSpec, consumer
from mqclient.errors import (
    APIError,
    BacklogFull,
    BrokerUnavailable,
    BufferFull,
    ConfigurationError,
    Conflict,
    Duplicate,
    Forbidden,
    InvalidRequest,
    MQClientError,
    NotFound,
    PayloadTooLarge,
    PermanentFailure,
    ProducerClosed,
    RateLimited,
    Reject,
    ServerError,
    Snooze,
    Unauthenticated,
)
from mqclient.message import Message, ProducedMessage
from mqclient.producer import Producer
from mqclient.transactions import ProducerTransaction, transaction_check_app
from mqclient.version import __version__

__all__ = [
    "APIError",
    "Admin",
    "BacklogFull",
    "BatchingProducer",
    "BrokerUnavailable",
    "BufferFull",
    "ClientConfig",
    "ConfigurationError",
    "Conflict",
    "ConsumerSpec",
    "Duplicate",
    "Forbidden",
    "Groups",
    "InvalidRequest",
    "MQClientError",
    "Message",
    "NotFound",
    "PayloadTooLarge",
    "PermanentFailure",
    "ProducedMessage",
    "Producer",
    "ProducerClosed",
    "ProducerTransaction",
    "RateLimited",
    "Reject",
    "ServerError",
    "Snooze",
    "Unauthenticated",
    "__version__",
    "consumer",
    "transaction_check_app",
]
