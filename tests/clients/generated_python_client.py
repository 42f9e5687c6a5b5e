"""Run by tests/clients/test_generated_clients.py with the client openapi-python-client
generated from /api/schema/ on sys.path (package `mqcenter_client`): produce, pull with a
wait, ack and read the trace, all through the generated, typed functions. Prints one JSON
line of what it saw. Arguments: base URL, token, topic."""

from __future__ import annotations

import json
import sys
import threading

from mqcenter_client import AuthenticatedClient
from mqcenter_client.api.ack import ack
from mqcenter_client.api.messages import message_detail, messages_produce
from mqcenter_client.api.pull import pull
from mqcenter_client.models import (
    AckRequestRequest,
    AckResult,
    MessageDetail,
    ProduceMessageRequest,
    ProduceRequestRequest,
    ProduceResponse,
    PullRequestRequest,
    PullResponse,
)
from mqcenter_client.models import AckResponse as AckAnswer

base, token, topic = sys.argv[1:4]
client = AuthenticatedClient(base_url=base, token=token, timeout=40)
consumer = "py-generated-1"
pulled: list[PullResponse] = []


def long_poll() -> None:
    answer = pull.sync(client=client, body=PullRequestRequest(
        topic=topic, group="python", consumer=consumer, max_messages=10, wait_seconds=10))
    assert isinstance(answer, PullResponse), answer
    pulled.append(answer)


# The pull waits (up to 10 s) for the message the produce below stores.
waiter = threading.Thread(target=long_poll)
waiter.start()
produced = messages_produce.sync(client=client, body=ProduceRequestRequest(messages=[
    ProduceMessageRequest(topic=topic, group="python", data={"order": 42, "lang": "python"}, key="customer-7")]))
assert isinstance(produced, ProduceResponse), produced
message_id = produced.messages[0].id
waiter.join(timeout=40)
ids = [message.id for message in pulled[0].messages]
acked = ack.sync(client=client, body=AckRequestRequest(consumer=consumer, results=[
    AckResult(id=i, status="SUCCESS", log="done in Python") for i in ids]))
assert isinstance(acked, AckAnswer), acked
detail = message_detail.sync(client=client, message_id=message_id)
assert isinstance(detail, MessageDetail), detail
print(json.dumps({
    "produced": message_id, "pulled": ids, "data": [m.data for m in pulled[0].messages],
    "outcomes": [str(r.outcome) for r in acked.results], "status": str(detail.status),
    "trace": [event.event for event in detail.trace],
}))
