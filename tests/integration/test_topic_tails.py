"""Following several topics with one pair of consumers (mirror.flow.tail.TopicTails: the heartbeat
watch), against a real broker with transactions."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer

from mirror.flow.tail import TopicTails
from tests.helpers import create_topic, unique_name
from tests.kafka_backends import KafkaCluster

pytestmark = pytest.mark.integration


def _committed(producer: Producer, topic: str, values: list[bytes], *, commit: bool = True) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=0)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.flush(30)


def test_each_topic_reads_its_committed_records_once_and_one_behind_an_open_transaction_is_said(
    target_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    first, second, late = (unique_name(request, f"{name}.heartbeats-") for name in ("P", "Q", "R"))
    for topic in (first, second, late):
        create_topic(target_cluster.bootstrap_servers, topic)
    writer = Producer(target_cluster.properties(**{"transactional.id": unique_name(request, "w-")}))
    writer.init_transactions(30)
    _committed(writer, first, [b"p1", b"p2"])
    writer.begin_transaction()
    writer.produce(first, value=b"aborted", partition=0)
    writer.abort_transaction(30)
    _committed(writer, second, [b"q1"])
    tails = TopicTails(target_cluster.properties())
    try:
        tails.follow(first)
        tails.follow(second)
        tails.follow(first)  # followed already: not read again from the start
        read, behind = tails.catch_up(timeout_seconds=10)
        assert {t: [r.value for r in records] for t, records in read.items()} == {
            first: [b"p1", b"p2"],
            second: [b"q1"],
        }
        assert behind == []

        # An open transaction holds its topic's read_committed end: said, and read once committed.
        opener = Producer(target_cluster.properties(**{"transactional.id": unique_name(request, "o-")}))
        opener.init_transactions(30)
        _committed(opener, second, [b"q2"], commit=False)
        _committed(writer, first, [b"p3"])
        tails.follow(late)
        _committed(writer, late, [b"r1"])
        # The open transaction keeps `second` behind for the whole round: a round long enough for
        # the topic followed last to be read on a loaded machine (2 s was not, in a CI run).
        read, behind = tails.catch_up(timeout_seconds=10)
        assert behind == [second]
        assert [r.value for r in read[first]] == [b"p3"]
        assert [r.value for r in read[late]] == [b"r1"]
        assert second not in read
        opener.commit_transaction(30)
        read, behind = tails.catch_up(timeout_seconds=10)
        assert {t: [r.value for r in records] for t, records in read.items()} == {second: [b"q2"]}
        assert behind == []
    finally:
        tails.close()
