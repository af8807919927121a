"""Our OffsetSync, Checkpoint and Heartbeat records, printed by Kafka's own MM2 formatters."""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import Producer

from mirror.kafka.wire import Checkpoint, Heartbeat, OffsetSync
from tests.helpers import create_topic, unique_name
from tests.kafka_backends import KafkaCluster

pytestmark = pytest.mark.integration


def kafka_formatter_output(cluster: KafkaCluster, topic: str, formatter: str, count: int) -> list[str]:
    """Run Kafka's ConsoleConsumer (from the resolved jars) with one of MM2's formatters."""
    assert cluster.libs is not None, "Kafka's Java tools are needed; set MIRROR_TEST_JAVA_TOOLS=1"
    command = [
        "java", "-cp", str(cluster.libs / "*"),
        "org.apache.kafka.tools.consumer.ConsoleConsumer",
        "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--from-beginning", "--max-messages", str(count), "--timeout-ms", "60000",
        "--formatter", f"org.apache.kafka.connect.mirror.formatters.{formatter}",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [line for line in result.stdout.splitlines() if line.strip()]


def produce(
    cluster: KafkaCluster, topic: str, records: list[OffsetSync] | list[Checkpoint] | list[Heartbeat]
) -> None:
    create_topic(cluster.bootstrap_servers, topic, config={"cleanup.policy": "compact"})
    producer = Producer(cluster.properties())
    for record in records:
        producer.produce(topic, key=record.key(), value=record.value(), partition=0)
    assert producer.flush(30) == 0


def test_kafka_offset_sync_formatter_reads_our_offset_syncs(
    source_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "mm2-offset-syncs.")
    produce(source_cluster, topic, [OffsetSync("orders", 3, 1000, 990), OffsetSync("é-topic", 0, 2**40, 7)])
    assert kafka_formatter_output(source_cluster, topic, "OffsetSyncFormatter", 2) == [
        "OffsetSync{topicPartition=orders-3, upstreamOffset=1000, downstreamOffset=990}",
        "OffsetSync{topicPartition=é-topic-0, upstreamOffset=1099511627776, downstreamOffset=7}",
    ]


def test_kafka_checkpoint_formatter_reads_our_checkpoints(
    source_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "A.checkpoints.")
    produce(
        source_cluster,
        topic,
        [
            Checkpoint("g1", "A.orders", 3, 1000, 991, ""),
            Checkpoint("billing", "A.pay", 0, 5, 4, "meta data"),
        ],
    )
    assert kafka_formatter_output(source_cluster, topic, "CheckpointFormatter", 2) == [
        "Checkpoint{consumerGroupId=g1, topicPartition=A.orders-3, upstreamOffset=1000, "
        "downstreamOffset=991, metadata=}",
        "Checkpoint{consumerGroupId=billing, topicPartition=A.pay-0, upstreamOffset=5, "
        "downstreamOffset=4, metadata=meta data}",
    ]


def test_kafka_heartbeat_formatter_reads_our_heartbeats(
    source_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "heartbeats-")
    produce(source_cluster, topic, [Heartbeat("A", "B", 1_700_000_000_000), Heartbeat("B", "A", 1)])
    assert kafka_formatter_output(source_cluster, topic, "HeartbeatFormatter", 2) == [
        "Heartbeat{sourceClusterAlias=A, targetClusterAlias=B, timestamp=1700000000000}",
        "Heartbeat{sourceClusterAlias=B, targetClusterAlias=A, timestamp=1}",
    ]
