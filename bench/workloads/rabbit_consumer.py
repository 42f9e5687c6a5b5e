"""Peer: RabbitMQ driven with pika. One consumer process: manual acks, prefetch 100, a no-op
handler (it counts, as every system's does: `counter.py`).
`python -m bench.workloads.rabbit_consumer QUEUE RUN`."""

from __future__ import annotations

import contextlib
import os
import sys

import pika

from bench.workloads.counter import handled_counter

RABBIT_URL = os.environ.get("BENCH_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")


def main(queue: str, run: str) -> None:
    counter = handled_counter()
    connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    channel = connection.channel()
    channel.queue_declare(queue=queue, durable=True)
    channel.basic_qos(prefetch_count=100)

    def handle(ch, method, properties, body) -> None:  # type: ignore[no-untyped-def]
        counter.add(run)
        ch.basic_ack(delivery_tag=method.delivery_tag)

    channel.basic_consume(queue=queue, on_message_callback=handle, auto_ack=False)
    try:
        channel.start_consuming()
    except KeyboardInterrupt:
        pass
    finally:
        with contextlib.suppress(Exception):  # shutting down anyway
            connection.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
