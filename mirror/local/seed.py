"""Sample records for the local clusters, so a demo has something to replicate."""

from __future__ import annotations

import time

from confluent_kafka import Producer

from mirror.kafka.admin import create_topic
from mirror.kafka.clients import admin_client, producer


def seed_topic(bootstrap_servers: str, topic: str, records: int, partitions: int) -> int:
    """Create `topic` if missing and append `records` sample orders; returns how many were written."""
    properties = {"bootstrap.servers": bootstrap_servers}
    create_topic(admin_client(properties), topic, partitions=partitions, replication_factor=None, config={})
    writer: Producer = producer({**properties, "linger.ms": "20"})
    now_ms = int(time.time() * 1000)
    for n in range(records):
        value = b'{"order": %d, "amount": %d, "currency": "EUR"}' % (n, (n * 37) % 1000)
        while True:
            try:
                writer.produce(
                    topic,
                    key=b"customer-%d" % (n % 97),
                    value=value,
                    headers=[("source", b"mirror local seed")],
                    timestamp=now_ms,
                )
                break
            except BufferError:
                writer.poll(0.1)
    return records - int(writer.flush(60))
