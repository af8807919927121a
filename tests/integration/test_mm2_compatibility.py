"""Moving between Apache Kafka's MirrorMaker 2 and mirror without losing the place."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from mirror.flow.source_offsets import SourcePartition, decode_value, encode_checkpoint_key, encode_key
from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Checkpoint, OffsetSync
from tests.groups import consume_and_commit, produce
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
    assert producer.flush(30) == 0

    properties = tmp_path / "mm2.properties"
    properties.write_text(mm2_properties(source_cluster, target_cluster, topic), encoding="utf-8")
    mm2 = _start_mm2(source_cluster, properties, tmp_path, tmp_path / "mm2.log")
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
    assert producer.flush(30) == 0
    config = write_config(tmp_path, source_cluster, target_cluster, [topic])
    run = replicate_until_caught_up(config, tmp_path / "run.log", source_cluster, target_cluster, [topic])

    # MM2's position for the topic (and for A's heartbeats, if MM2 copied them too) was taken over.
    assert re.search(r"took [1-9]\d* partition positions from mm2-offsets\.A\.internal", run.output())
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


def test_real_mirrormaker2_checkpoints_from_our_offset_syncs(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    assert source_cluster.libs is not None, "needs Kafka's jars to run MirrorMaker 2"
    topic, group = unique_name(request, "syncs-for-mm2-"), unique_name(request, "mm2-group-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    produce(source_cluster, topic, [b"r%d" % i for i in range(2000)])
    consume_and_commit(source_cluster, group, topic, 0, 700)
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], groups=[group])
    replicate_until_caught_up(config, tmp_path / "run.log", source_cluster, target_cluster, [topic])
    # mirror is stopped; the group moves on, and only MM2 is left to translate where it is now.
    position = consume_and_commit(source_cluster, group, topic, 0, 2000)
    ours = _last_sync_downstream(target_cluster, topic)

    properties = tmp_path / "mm2.properties"
    properties.write_text(
        mm2_properties(source_cluster, target_cluster, topic)
        + f"A->B.groups = {group}\nA->B.emit.checkpoints.interval.seconds = 1\n"
        + "A->B.offset-syncs.topic.location = target\nA->B.sync.group.offsets.enabled = false\n",
        encoding="utf-8",
    )
    log = tmp_path / "mm2.log"
    mm2 = _start_mm2(source_cluster, properties, tmp_path, log)
    checkpoint_key = encode_checkpoint_key(group, f"A.{topic}", 0)
    try:
        # MM2's checkpoint connector read our syncs and checkpointed the group's new position;
        # its Connect offset key is byte-for-byte the one our checkpoint component writes.
        assert_eventually(
            lambda: _assert_equal(
                [k for _, k, _ in offsets_records(target_cluster) if k == checkpoint_key], [checkpoint_key]
            ),
            timeout=180,
            interval=1,
        )
        newest = _checkpoints_of(target_cluster, group)[-1]
    finally:
        mm2.send_signal(signal.SIGTERM)
        mm2.wait(timeout=60)
    assert (newest.upstream_offset, newest.downstream_offset) == (position, ours + 1)
    errors = [line for line in log.read_text(encoding="utf-8").splitlines() if " ERROR " in line]
    assert not [line for line in errors if "OffsetSync" in line or "Checkpoint" in line], errors


def _start_mm2(
    cluster: KafkaCluster, properties: Path, directory: Path, log: Path
) -> subprocess.Popen[bytes]:
    log4j = directory / "log4j2-mm2.properties"
    log4j.write_text(
        "appender.f.type=File\nappender.f.name=f\n"
        f"appender.f.fileName={log}\nappender.f.layout.type=PatternLayout\n"
        "appender.f.layout.pattern=%d %p %c: %m%n\nrootLogger.level=info\nrootLogger.appenderRef.f.ref=f\n",
        encoding="utf-8",
    )
    assert cluster.libs is not None
    return subprocess.Popen(
        [
            "java", f"-Dlog4j2.configurationFile={log4j}", "-cp", str(cluster.libs / "*"),
            "org.apache.kafka.connect.mirror.MirrorMaker", str(properties),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip


def _last_sync_downstream(target: KafkaCluster, topic: str) -> int:
    tail = PartitionTail(target.properties(), "mm2-offset-syncs.A.internal")
    try:
        syncs = [OffsetSync.decode(r.key, r.value) for r in tail.catch_up()]
    finally:
        tail.close()
    return max(s.downstream_offset for s in syncs if s.topic == topic)


def _checkpoints_of(target: KafkaCluster, group: str) -> list[Checkpoint]:
    tail = PartitionTail(target.properties(), "A.checkpoints.internal")
    try:
        decoded = [Checkpoint.decode(r.key, r.value) for r in tail.catch_up()]
    finally:
        tail.close()
    return [c for c in decoded if c.group == group]
