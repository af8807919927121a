"""Reading an offsets topic to its end the KIP-618 way, against a real broker with transactions."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from mirror.flow.offsets_store import read_to_end
from mirror.flow.source_offsets import SourcePartition, decode_value, encode_key, encode_value
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster

pytestmark = pytest.mark.integration


def transactional_producer(cluster: KafkaCluster, name: str) -> Producer:
    producer = Producer(cluster.properties(**{"transactional.id": name}))
    producer.init_transactions(30)
    return producer


def key(partition: int) -> bytes:
    return encode_key(SourcePartition("A", "orders", partition))


@pytest.fixture
def offsets_topic(target_cluster: KafkaCluster, request: pytest.FixtureRequest) -> str:
    topic = unique_name(request, "mm2-offsets.")
    create_topic(target_cluster.bootstrap_servers, topic, partitions=3, config={"cleanup.policy": "compact"})
    return topic


def test_keeps_the_latest_committed_value_per_key(target_cluster: KafkaCluster, offsets_topic: str) -> None:
    producer = transactional_producer(target_cluster, offsets_topic)
    for offset in (10, 20, 30):
        producer.begin_transaction()
        producer.produce(offsets_topic, key=key(0), value=encode_value(offset), partition=0)
        producer.produce(offsets_topic, key=key(1), value=encode_value(offset + 1), partition=1)
        producer.commit_transaction(30)
    positions = read_to_end(target_cluster.properties(), offsets_topic)
    assert {k: decode_value(v) for k, v in positions.items()} == {key(0): 30, key(1): 31}


def test_ignores_aborted_transactions_even_when_an_abort_marker_ends_the_partition(
    target_cluster: KafkaCluster, offsets_topic: str
) -> None:
    producer = transactional_producer(target_cluster, offsets_topic)
    producer.begin_transaction()
    producer.produce(offsets_topic, key=key(0), value=encode_value(5), partition=0)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(offsets_topic, key=key(0), value=encode_value(999), partition=0)
    assert producer.flush(30) == 0  # the aborted record really reaches the log
    producer.abort_transaction(30)
    positions = read_to_end(target_cluster.properties(), offsets_topic, timeout_seconds=30)
    assert {k: decode_value(v) for k, v in positions.items()} == {key(0): 5}


def test_a_tombstone_removes_the_position(target_cluster: KafkaCluster, offsets_topic: str) -> None:
    producer = Producer(target_cluster.properties())
    producer.produce(offsets_topic, key=key(2), value=encode_value(7), partition=2)
    producer.produce(offsets_topic, key=key(2), value=None, partition=2)
    producer.produce(offsets_topic, key=key(1), value=encode_value(3), partition=1)
    assert producer.flush(30) == 0
    positions = read_to_end(target_cluster.properties(), offsets_topic)
    assert set(positions) == {key(1)}


def test_waits_for_a_transaction_open_at_the_start_and_sees_its_commit(
    target_cluster: KafkaCluster, offsets_topic: str
) -> None:
    producer = transactional_producer(target_cluster, offsets_topic)
    producer.begin_transaction()
    producer.produce(offsets_topic, key=key(0), value=encode_value(42), partition=0)
    assert producer.flush(30) == 0  # in the log, past the last stable offset, not yet committed

    result: dict[bytes, bytes] = {}
    events: list[str] = []

    def read() -> None:
        result.update(read_to_end(target_cluster.properties(), offsets_topic))
        events.append("read")

    reader = threading.Thread(target=read)
    reader.start()
    try:
        # The high watermark includes the open transaction: the reader gets time to (wrongly)
        # stop there before the commit. What it returned, and when, says whether it waited.
        time.sleep(2)
    finally:
        # Marked before the call: the reader may see the commit's markers, and return, before
        # commit_transaction() hears the coordinator's answer.
        events.append("committing")
        producer.commit_transaction(30)
    reader.join(timeout=60)
    assert events[:2] == ["committing", "read"], "read_to_end returned before the open transaction finished"
    assert {k: decode_value(v) for k, v in result.items()} == {key(0): 42}


def test_empty_offsets_topic_reads_as_no_positions(target_cluster: KafkaCluster, offsets_topic: str) -> None:
    assert assert_eventually(lambda: read_to_end(target_cluster.properties(), offsets_topic)) == {}
