"""Taking a flow's lease against a real target: the mark the previous holder committed is read even
while a transaction the target never ended holds offsets of the lease group."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror.config.flow_settings import FlowSettings
from mirror.flow.mark import FlowMark
from mirror.source.lease import FlowLease
from mirror.topics.sync import TopicSync
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration]


def _flow(source: KafkaCluster, target: KafkaCluster) -> FlowSettings:
    # Aliases of this test alone: its lease group, mark and transactional ids are its own.
    alias = "L" + uuid.uuid4().hex[:6]
    return FlowSettings(
        source=alias,
        target="X",
        source_consumer=source.properties(),
        source_admin=source.properties(),
        source_producer=source.properties(),
        target_producer=target.properties(),
        target_consumer=target.properties(),
        target_admin=target.properties(),
        topics=[],
        topics_exclude=[],
        offsets_topic=f"mm2-offsets.{alias}.internal",
        instance_id="first",
    )


def _open_transaction_on_the_lease_group(settings: FlowSettings, target: KafkaCluster) -> Producer:
    """A producer of another transactional id with offsets of the lease group in a transaction it
    leaves open: to read_committed readers of the group, as a transaction the target never ended."""
    producer = Producer(
        target.properties(
            **{"transactional.id": f"stranger-{uuid.uuid4().hex[:6]}", "transaction.timeout.ms": "300000"}
        )
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    group = Consumer(target.properties(**{"group.id": settings.lease_group()}))
    try:
        offsets = [TopicPartition(settings.offsets_topic, 0, 7, metadata="not a mark")]
        producer.send_offsets_to_transaction(offsets, group.consumer_group_metadata(), 30)
    finally:
        group.close()
    return producer


def test_taking_the_lease_reads_the_last_mark_though_a_transaction_the_target_never_ended_holds_its_group(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, caplog: pytest.LogCaptureFixture
) -> None:
    settings = _flow(source_cluster, target_cluster)
    TopicSync(settings).ensure_internal_topics()
    first = FlowLease(settings)
    assert first.take() is None
    first.acquire(FlowMark("first", generation=3, task_ids=2))
    first.close()

    stranger = _open_transaction_on_the_lease_group(settings, target_cluster)
    try:
        second = FlowLease(replace(settings, instance_id="second"))
        with caplog.at_level(logging.WARNING, logger="mirror.source.lease"):
            previous = second.take()
        second.close()
    finally:
        stranger.abort_transaction(30)

    assert previous is not None
    assert (previous.instance, previous.generation, previous.task_ids) == ("first", 3, 2)
    assert "kafka-transactions.sh find-hanging" in caplog.text, caplog.text
