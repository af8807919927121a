"""Source records for tests: null keys and values, repeated headers, aborted transactions."""

from __future__ import annotations

import random

from confluent_kafka import Producer

from tests.kafka_backends import KafkaCluster

LARGE_VALUE = bytes(range(256)) * 3500  # ~900 KB, near the default 1 MB limit


def produce_mixed(
    cluster: KafkaCluster, topic: str, count: int, partitions: int, *, seed: int, aborted_every: int = 0
) -> None:
    """Null keys, null values, repeated headers, and (with aborted_every) aborted transactions between
    committed ones, so the source has markers and aborted records the copy must skip."""
    rng = random.Random(seed)
    producer = Producer(cluster.properties(**{"transactional.id": f"seed-{topic}", "linger.ms": "10"}))
    producer.init_transactions(30)
    sent = 0
    batch = 0
    while sent < count:
        batch += 1
        producer.begin_transaction()
        size = min(rng.randint(200, 2000), count - sent)
        for i in range(size):
            n = sent + i
            key = None if n % 7 == 0 else f"key-{n}".encode()
            value = None if n % 11 == 0 else f"value-{n}-".encode() * rng.randint(1, 20)
            headers = [("trace", str(n).encode()), ("trace", None), ("kind", b"x")] if n % 3 == 0 else None
            producer.produce(topic, value=value, key=key, partition=n % partitions, headers=headers)
        if aborted_every and batch % aborted_every == 0:
            assert producer.flush(30) == 0  # the aborted records really reach the log
            producer.abort_transaction(30)
            continue
        producer.commit_transaction(30)
        sent += size
