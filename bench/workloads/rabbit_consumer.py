"""Peer: RabbitMQ driven with pika. One consumer process: manual acks, prefetch 100, a no-op
handler (one Redis INCR). `python -m bench.workloads.rabbit_consumer QUEUE RUN`."""

from __future__ import annotations

import contextlib
import os
import sys

import pika
import redis

RABBIT_URL = os.environ.get("BENCH_RABBIT_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")


def main(queue: str, run: str) -> None:
    counter = redis.Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/7"))
    connection = pika.BlockingConnection(pika.URLParameters(RABBIT_URL))
    channel = connection.channel()
    channel.queue_declare(queue=queue, durable=True)
    channel.basic_qos(prefetch_count=100)

    def handle(ch, method, properties, body) -> None:  # type: ignore[no-untyped-def]
        counter.incr(f"bench:done:{run}")
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
