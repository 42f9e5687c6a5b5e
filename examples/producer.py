"""Example producer: ``python -m examples.producer [count]``.

Reads ``MQ_BROKERS`` and ``MQ_TOKEN`` from the environment. Shows a publish that fans out to
every subscribed group (``billing`` and ``audit``, see consumers.py), a message to one group,
and the background batching mode for high rates, whose futures report each message's fate.
"""

from __future__ import annotations

import sys

from mqclient import BrokerUnavailable, InvalidRequest, Producer


def main(count: int = 10) -> int:
    with Producer() as producer:
        # One line, no group: a publish, stored once for every group subscribed to the topic
        # (billing and audit once their consumers ran), and committed when it returns.
        receipt = producer.produce(
            "orders",
            {"id": 1, "amount": 42},
            key="customer-7",
            headers={"source": "example"},
        )
        copies = ", ".join(f"{g}: {i}" for g, i in zip(receipt.groups, receipt.ids, strict=True))
        print(f"order 1 stored for each group ({copies})")

        # With a group: to that group only.
        direct = producer.produce("orders", {"id": 2, "amount": 10}, group="billing")
        print(f"order 2 stored for billing only as {direct.id}")

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
            futures = [batch.submit("orders", {"id": 100 + n, "amount": n}) for n in range(count)]
            stored = [future.result() for future in futures]
        print(f"batched {len(stored)} orders: {sum(len(r.ids) for r in stored)} copies stored")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
