"""A copy task's partitions read through several source consumers (mirror.source.split_reader)."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer, TopicPartition

from mirror.source.copy_clients import source_reader
from mirror.source.record_copy import next_messages
from mirror.source.split_reader import SplitReader
from tests.helpers import create_topic
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration]

PARTITIONS = 10
PER_PARTITION = 50


def test_partitions_split_over_consumers_are_each_read_once_in_order_from_where_they_were_assigned(
    source_cluster: KafkaCluster,
) -> None:
    topic = f"split-{uuid.uuid4().hex[:6]}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=PARTITIONS)
    producer = Producer(source_cluster.properties())
    for n in range(PER_PARTITION):
        for p in range(PARTITIONS):
            producer.produce(topic, value=b"%d-%d" % (p, n), partition=p)
    assert producer.flush(30) == 0
    partitions = [(topic, p) for p in range(PARTITIONS)]
    reader = SplitReader(
        partitions,
        lambda: source_reader(source_cluster.properties(), f"split-{topic}", PARTITIONS),
        per_consumer=3,
    )
    try:
        assert len(reader.consumers) == 4
        start = {p: p for p in range(PARTITIONS)}  # partition p is read from offset p
        reader.assign([TopicPartition(topic, p, start[p]) for p in range(PARTITIONS)])
        read: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
        expected = sum(PER_PARTITION - start[p] for p in range(PARTITIONS))
        deadline = time.monotonic() + 60
        while sum(map(len, read.values())) < expected and time.monotonic() < deadline:
            for message in next_messages(reader, 7, 0.5):  # small batches: every consumer takes turns
                assert message.error() is None, message.error()
                read[message.partition()].append(message.value())
        assert read == {
            p: [b"%d-%d" % (p, n) for n in range(start[p], PER_PARTITION)] for p in range(PARTITIONS)
        }
        asked = [TopicPartition(topic, p) for p in (9, 0, 5, 3)]
        assert [(tp.partition, tp.offset) for tp in reader.position(asked)] == [
            (p, PER_PARTITION) for p in (9, 0, 5, 3)
        ]
        assert reader.reader_of(topic, 7) is reader.consumers[2]
    finally:
        reader.close()


REWINDS = 20


def test_a_reassigned_reader_never_names_a_position_consumed_before_the_reassign(
    source_cluster: KafkaCluster,
) -> None:
    """A copy task rewinds after an abort: it re-assigns its partitions at the committed offsets
    and, before any record comes back, takes position() as where the consumer skipped aborted
    records to. librdkafka answers a plain consumer's position() right after a re-assign from the
    last record consumed before it (about one trial in five here); the reader must not."""
    topic = f"rewind-{uuid.uuid4().hex[:6]}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    producer = Producer(source_cluster.properties())
    for n in range(1000):
        producer.produce(topic, value=b"%d" % n, partition=0)
    assert producer.flush(30) == 0
    reader = SplitReader(
        [(topic, 0)], lambda: source_reader(source_cluster.properties(), f"rewind-{topic}", 1)
    )
    seen: list[int] = []
    try:
        for _ in range(REWINDS):
            reader.assign([TopicPartition(topic, 0, 0)])
            consumed = 0
            deadline = time.monotonic() + 30
            while consumed < 500 and time.monotonic() < deadline:
                consumed += len(next_messages(reader, 500 - consumed, 0.5))
            assert consumed == 500
            assert reader.position([TopicPartition(topic, 0)])[0].offset == 500
            reader.assign([TopicPartition(topic, 0, 100)])  # the rewind
            for _ in range(20):
                seen.append(reader.position([TopicPartition(topic, 0)])[0].offset)
                time.sleep(0.001)
    finally:
        reader.close()
    # Before its first fetch a new assignment has no position (-1001); after it, at most 100 plus
    # what was fetched is never returned by position() until consumed: so never more than 100.
    assert max(seen) <= 100, sorted(set(seen))
