"""Example producer: ``python -m examples.producer [count]``.

Reads ``MQ_BROKERS`` and ``MQ_TOKEN`` from the environment. Shows the three ways to send:
one durable call per message, a broadcast to every group, and the background batching mode
for high rates, whose futures report each message's fate.
"""

from __future__ import annotations

import sys

from mqclient import BrokerUnavailable, InvalidRequest, Producer


def main(count: int = 10) -> int:
    with Producer() as producer:
        # One line: returns after the broker committed the message.
        receipt = producer.produce(
            "orders",
            {"id": 1, "amount": 42},
            group="billing",
            key="customer-7",
            headers={"source": "example"},
        )
        print(f"stored order message {receipt.id}")

        # A copy for every group of the topic (billing and audit, once their consumers
        # registered or the topic declares them).
        copies = producer.broadcast("orders", {"id": 2, "amount": 10})
        print(f"broadcast stored as {[copy.id for copy in copies]}")

        # A typed error carries the API code; a broker outage raises BrokerUnavailable after
        # the retries, and retrying it later cannot create a duplicate.
        try:
            producer.produce("not a valid topic!", {})
        except InvalidRequest as exc:
            print(f"rejected as expected: {exc.code}: {exc.message}")
        except BrokerUnavailable as exc:
            print(f"no broker reachable: {exc}")
            return 1

        # High rate: batched in the background; every future ends with a receipt or an error.
        with producer.batching(linger=0.01) as batch:
            futures = [
                batch.submit("orders", {"id": 100 + n, "amount": n}, group="billing")
                for n in range(count)
            ]
            ids = [future.result().id for future in futures]
        print(f"batched {len(ids)} orders: {ids[0]}..{ids[-1]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
