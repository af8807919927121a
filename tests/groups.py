"""Consumer groups in tests: consume and commit on one cluster, resume on another, read offsets."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.kafka_backends import KafkaCluster


def produce(cluster: KafkaCluster, topic: str, values: list[bytes], partition: int = 0) -> None:
    producer = Producer(cluster.properties())
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0, f"records for {topic} not delivered"


def consume_and_commit(cluster: KafkaCluster, group: str, topic: str, partition: int, count: int) -> int:
    """Consume exactly `count` records of one partition from its start and commit: the group's position."""
    consumer = Consumer(
        cluster.properties(
            **{"group.id": group, "enable.auto.commit": "false", "auto.offset.reset": "earliest"}
        )
    )
    consumer.assign([TopicPartition(topic, partition, 0)])
    taken, position = 0, 0
    deadline = time.monotonic() + 60
    try:
        while taken < count:
            assert time.monotonic() < deadline, f"only {taken} of {count} records of {topic} arrived"
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            taken += 1
            position = message.offset() + 1
        consumer.commit(offsets=[TopicPartition(topic, partition, position)], asynchronous=False)
    finally:
        consumer.close()
    return position


def commit(cluster: KafkaCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    """Commit `offsets` for `group` as its consumer would (the group has no members meanwhile)."""
    consumer = Consumer(cluster.properties(**{"group.id": group, "enable.auto.commit": "false"}))
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, offset) for (t, p), offset in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def committed(cluster: KafkaCluster, group: str, topic: str, partitions: int = 1) -> dict[int, int]:
    """The group's committed offsets (partitions without one are absent)."""
    consumer = Consumer(cluster.properties(**{"group.id": group}))
    try:
        result = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in result if tp.offset >= 0}


def resume(
    cluster: KafkaCluster,
    group: str,
    topic: str,
    *,
    expected: int,
    and_commit: bool = False,
) -> list[bytes]:
    """What a consumer of `group` reads on `cluster` from its committed position: the values, in order.

    Reads until `expected` records arrived and every assigned partition is read to its end, so
    extra (re-read) records are counted too. Commits its position at the end only if `and_commit`.
    """
    consumer = Consumer(
        cluster.properties(
            **{
                "group.id": group,
                "enable.auto.commit": "false",
                # No committed offset must show up as a failure, not as a silent re-read.
                "auto.offset.reset": "latest",
                "isolation.level": "read_committed",
                "enable.partition.eof": "true",
            }
        )
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    at_end: set[int] = set()  # partitions read to their end since their last record
    deadline = time.monotonic() + 90
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
                at_end.discard(message.partition())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
            assigned = {tp.partition for tp in consumer.assignment()}
            if len(values) >= expected and assigned and assigned <= at_end:
                break
        if and_commit and values:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return values
