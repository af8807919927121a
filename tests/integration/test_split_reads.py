"""A copy task's partitions read through several source consumers (mirror.source.split_reader),
and its idle ones paused until the source holds more of them (mirror.source.idle_pause)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Producer, TopicPartition

from mirror.source.copy_clients import end_asker, source_reader
from mirror.source.idle_pause import IdlePause
from mirror.source.partition_copy import PartitionCopy
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


def _reader_of(source_cluster: KafkaCluster, topic: str, partitions: int) -> SplitReader:
    return SplitReader(
        [(topic, p) for p in range(partitions)],
        lambda: source_reader(source_cluster.properties(), f"pause-{topic}", partitions),
        per_consumer=2,
    )


def _produce(source_cluster: KafkaCluster, topic: str, counts: dict[int, range]) -> None:
    producer = Producer(source_cluster.properties())
    for p, numbers in counts.items():
        for n in numbers:
            producer.produce(topic, value=b"%d-%d" % (p, n), partition=p)
    assert producer.flush(30) == 0


def _read_until(
    reader: SplitReader,
    read: dict[int, list[bytes]],
    done: Callable[[], bool],
    seconds: float,
    then: Callable[[], None] = lambda: None,
) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        for message in next_messages(reader, 100, 0.2):
            assert message.error() is None, message.error()
            read[message.partition()].append(message.value())
        then()


def test_a_paused_partition_is_not_fetched_and_resumes_where_its_records_were_consumed(
    source_cluster: KafkaCluster,
) -> None:
    """librdkafka's pause, as the task uses it: a paused partition is left out of fetches, and
    resumed it is read from the last record consumed, whether its queue held records fetched
    but not consumed when it was paused (t-1) or none (t-0): none lost, none twice."""
    topic = f"pause-{uuid.uuid4().hex[:6]}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    _produce(source_cluster, topic, {p: range(10) for p in range(4)})
    reader = _reader_of(source_cluster, topic, 4)
    read: dict[int, list[bytes]] = {p: [] for p in range(4)}
    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(4)])
        _read_until(reader, read, lambda: sum(map(len, read.values())) == 40, 60)
        _produce(source_cluster, topic, {1: range(10, 20)})
        deadline = time.monotonic() + 30
        while reader.fetched_end(topic, 1) < 20 and time.monotonic() < deadline:
            time.sleep(0.05)  # the end is cached by librdkafka's fetcher: no poll, no record taken
        assert reader.fetched_end(topic, 1) == 20  # fetched, not consumed
        reader.pause([(topic, 0), (topic, 1)])
        # A fetch sent before the pause may still be parked at the broker (up to fetch.wait.max.ms)
        # and tell t-0's end when it returns: librdkafka drops its records, not the end it told.
        _read_until(reader, read, lambda: False, 1)
        before = {p: len(read[p]) for p in range(4)}
        _produce(source_cluster, topic, {0: range(10, 15), 1: range(20, 25), 2: range(10, 15)})
        _read_until(reader, read, lambda: len(read[2]) == 15, 30)
        time.sleep(1)  # t-2's consumer, fetching, and t-0's, idle, each fetched again since
        assert reader.fetched_end(topic, 0) == 10  # no fetch named t-0 since its pause
        assert {p: len(read[p]) for p in (0, 1)} == {p: before[p] for p in (0, 1)}
        reader.resume([(topic, 0), (topic, 1)])
        _read_until(reader, read, lambda: len(read[0]) == 15 and len(read[1]) == 25, 60)
        _read_until(reader, read, lambda: False, 1)  # and nothing more, in particular no repeat
    finally:
        reader.close()
    expected = {0: 15, 1: 25, 2: 15, 3: 10}
    assert read == {p: [b"%d-%d" % (p, n) for n in range(count)] for p, count in expected.items()}


def test_idle_partitions_are_paused_and_one_the_source_holds_more_of_is_read_again_at_once(
    source_cluster: KafkaCluster,
) -> None:
    """IdlePause against a real source: its ends asked read_committed through a consumer of its
    own; the partition given records is resumed and read, the others stay paused. Its fail-open
    wait is longer than the test reads, so only the source's answer can have resumed it."""
    topic = f"idle-{uuid.uuid4().hex[:6]}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=4)
    _produce(source_cluster, topic, {p: range(5) for p in range(4)})
    reader = _reader_of(source_cluster, topic, 4)
    parts = [PartitionCopy("A->B", topic, p, f"A.{topic}", 100) for p in range(4)]
    idle = IdlePause(
        lambda: end_asker(source_cluster.properties(), f"idle-{topic}"),
        idle_seconds=1.0,
        ask_seconds=0.2,
        answer_seconds=120.0,
        check_seconds=0.2,
    )
    read: dict[int, list[bytes]] = {p: [] for p in range(4)}

    def look() -> None:
        for p in range(4):
            parts[p].position = len(read[p])  # each record read is committed at once
        idle.look(parts, reader)

    try:
        reader.assign([TopicPartition(topic, p, 0) for p in range(4)])
        _read_until(reader, read, lambda: len(idle.paused) == 4, 60, look)
        assert sorted(idle.paused) == [(topic, p) for p in range(4)]
        _produce(source_cluster, topic, {2: range(5, 8)})
        _read_until(reader, read, lambda: len(read[2]) == 8, 30, look)
        assert sorted(idle.paused) == [(topic, p) for p in (0, 1, 3)]
    finally:
        idle.close()
        reader.close()
    assert read == {p: [b"%d-%d" % (p, n) for n in range(8 if p == 2 else 5)] for p in range(4)}
