"""Offset translation: how far back a group that caught up on the source lands on the target."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupTopicPartitions,
    KafkaError,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from bench.contenders import Clusters
from bench.workloads import PARTITIONS

SYNC_TIMEOUT_SECONDS = 90.0


def measure(
    clusters: Clusters,
    *,
    topic: str,
    remote: str,
    group: str,
    alive: Callable[[], None],
    checkpoint_seconds: int,
) -> dict[str, Any]:
    """The group consumes the whole source topic and commits; once its offsets on the target have
    not moved for three checkpoint intervals, a consumer of the group on the target counts the
    records it is handed again."""
    consumed = consume_to_end_and_commit(clusters.source, topic, group)
    committed_at = time.monotonic()
    admin = AdminClient({"bootstrap.servers": clusters.target})
    last: dict[int, int] = {}
    stable_since = committed_at
    while time.monotonic() - committed_at < SYNC_TIMEOUT_SECONDS:
        alive()
        offsets = _target_group_offsets(admin, group, remote)
        if offsets != last:
            last, stable_since = offsets, time.monotonic()
        elif len(offsets) == PARTITIONS and time.monotonic() - stable_since > 3 * checkpoint_seconds:
            break
        time.sleep(0.5)
    synced = len(last) == PARTITIONS
    return {
        "group_records_consumed_on_source": consumed,
        "synced": synced,
        "records_re_read": _re_read(clusters.target, remote, group) if synced else None,
    }


def consume_to_end_and_commit(bootstrap: str, topic: str, group: str) -> int:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    positions: dict[int, int] = {}
    for message in _until_every_end(consumer):
        positions[message.partition()] = message.offset() + 1
    consumer.commit(offsets=[TopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    consumer.close()
    return sum(positions.values())


def _target_group_offsets(admin: AdminClient, group: str, topic: str) -> dict[int, int]:
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    try:
        result = future.result(timeout=30)
    except Exception:  # noqa: BLE001 - a group that does not exist yet reads as no offsets
        return {}
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.topic == topic and tp.offset >= 0}


def _re_read(bootstrap: str, topic: str, group: str) -> int:
    """Records a consumer of `group` reads on the target from its synced offsets to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": True,
        }
    )
    committed = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=30)
    consumer.assign(
        [
            TopicPartition(topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING)
            for tp in committed
        ]
    )
    read = sum(1 for message in _until_every_end(consumer) if message.key() != b"warm-up")
    consumer.close()
    return read


def _until_every_end(consumer: Consumer) -> Iterator[Message]:
    """The records of the consumer's partitions (enable.partition.eof), until each reached its end."""
    at_end: set[int] = set()
    while len(at_end) < PARTITIONS:
        for message in consumer.consume(10_000, timeout=1):
            error = message.error()
            if error is None:
                yield message
            elif error.code() == KafkaError._PARTITION_EOF:
                at_end.add(message.partition())
