"""Moving between Apache Kafka's MirrorMaker 2 and mirror without losing the place."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from mirror.kafka.source_offsets import SourcePartition, decode_value, encode_key
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import replicate_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]

OFFSETS_TOPIC = "mm2-offsets.A.internal"


def mm2_properties(source: KafkaCluster, target: KafkaCluster, topic: str) -> str:
    return f"""
clusters = A, B
A.bootstrap.servers = {source.bootstrap_servers}
B.bootstrap.servers = {target.bootstrap_servers}
A->B.enabled = true
A->B.topics = {topic}
B->A.enabled = false
emit.heartbeats.enabled = false
sync.topic.acls.enabled = false
replication.factor = 1
offset-syncs.topic.replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset.storage.replication.factor = 1
config.storage.replication.factor = 1
status.storage.replication.factor = 1
B.offset.flush.interval.ms = 500
"""


def offsets_records(target: KafkaCluster) -> list[tuple[int, bytes, bytes | None]]:
    """(partition, key, value) of every committed record of the offsets topic, in partition order."""
    consumer = Consumer(
        target.properties(
            **{"group.id": "inspect", "isolation.level": "read_committed", "enable.partition.eof": True}
        )
    )
    partitions = consumer.list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions
    consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_BEGINNING) for p in partitions])
    records, finished = [], set()
    while len(finished) < len(partitions):
        message = consumer.poll(5)
        assert message is not None, "the offsets topic did not reach its end"
        if message.error() is not None:
            finished.add(message.partition())
            continue
        records.append((message.partition(), message.key(), message.value()))
    consumer.close()
    return records


def stored_position(target: KafkaCluster, key: bytes) -> int | None:
    values = [value for _, k, value in offsets_records(target) if k == key]
    return decode_value(values[-1]) if values else None


def test_mirror_resumes_where_real_mirrormaker2_stopped(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert source_cluster.libs is not None, "needs Kafka's jars to run MirrorMaker 2"
    topic = unique_name(request, "from-mm2-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    producer = Producer(source_cluster.properties())
    for i in range(3000):
        producer.produce(topic, key=b"%d" % i, value=b"before-%d" % i, partition=0)
    producer.flush(30)

    properties = tmp_path / "mm2.properties"
    properties.write_text(mm2_properties(source_cluster, target_cluster, topic), encoding="utf-8")
    log4j = tmp_path / "log4j2.properties"
    log4j.write_text(
        "appender.f.type=File\nappender.f.name=f\n"
        f"appender.f.fileName={tmp_path / 'mm2.log'}\nappender.f.layout.type=PatternLayout\n"
        "appender.f.layout.pattern=%d %p %c: %m%n\nrootLogger.level=info\nrootLogger.appenderRef.f.ref=f\n",
        encoding="utf-8",
    )
    mm2 = subprocess.Popen(
        [
            "java", f"-Dlog4j2.configurationFile={log4j}", "-cp", str(source_cluster.libs / "*"),
            "org.apache.kafka.connect.mirror.MirrorMaker", str(properties),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    key = encode_key(SourcePartition("A", topic, 0))
    try:
        # MM2 has copied everything and committed the last offset under the key we would write.
        assert_eventually(
            lambda: _assert_equal(stored_position(target_cluster, key), 2999), timeout=180, interval=1
        )
    finally:
        mm2.send_signal(signal.SIGTERM)
        mm2.wait(timeout=60)

    for i in range(2000):
        producer.produce(topic, key=b"%d" % (3000 + i), value=b"after-%d" % i, partition=0)
    producer.flush(30)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    run = replicate_until_caught_up(config, tmp_path / "run.log", source_cluster, target_cluster, [topic])

    assert "took 1 partition positions from mm2-offsets.A.internal" in run.output()
    # MM2's copy plus ours: every record once, none twice.
    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
    )
    # Our offsets records use MM2's exact key bytes and Connect's partitioning, so MM2 resumes from them.
    ours_and_mm2 = [(partition, value) for partition, k, value in offsets_records(target_cluster) if k == key]
    assert len({partition for partition, _ in ours_and_mm2}) == 1
    assert decode_value(ours_and_mm2[-1][1]) == 4999


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected
