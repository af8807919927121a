"""A copy task whose consumer stops fetching a partition (librdkafka once left partitions on a dead
leader for a whole outage) reads it again through new consumers: every record still copied once."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition

from mirror.config.flow_settings import FlowSettings
from mirror.source import task as task_module
from mirror.source.task_fetches import TaskFetches
from mirror.source.task_spec import CopyTaskSpec
from mirror.topics.sync import TopicSync
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.records import read_topic

pytestmark = [pytest.mark.integration]

PARTITIONS = 4
STOPPED = 2  # the partition the consumer is made to stop fetching


def _produce(cluster: KafkaCluster, topic: str, batch: int, per_partition: int) -> None:
    producer = Producer(cluster.properties())
    for n in range(per_partition):
        for p in range(PARTITIONS):
            producer.produce(topic, key=b"%d" % p, value=b"%d-%d-%d" % (batch, p, n), partition=p)
    assert producer.flush(30) == 0


def test_a_partition_its_consumer_stopped_fetching_is_read_again_through_new_consumers(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Aliases of this test alone: its flow's mark, positions group and transactional ids are its own.
    alias = "W" + uuid.uuid4().hex[:6]
    topic = unique_name(request, "stuck-")
    settings = FlowSettings(
        source=alias,
        target="X",
        source_consumer=source_cluster.properties(),
        source_admin=source_cluster.properties(),
        source_producer=source_cluster.properties(),
        target_producer=target_cluster.properties(),
        target_consumer=target_cluster.properties(),
        target_admin=target_cluster.properties(),
        topics=[topic],
        topics_exclude=[],
        offsets_topic=f"mm2-offsets.{alias}.internal",
        emit_checkpoints=False,
        emit_heartbeats=False,
        reverse_heartbeats=False,
    )
    TopicSync(settings).ensure_internal_topics()  # what `mirror run` does before its tasks start
    remote = settings.remote_topic(topic)
    create_topic(source_cluster.bootstrap_servers, topic, partitions=PARTITIONS)
    create_topic(target_cluster.bootstrap_servers, remote, partitions=PARTITIONS)
    _produce(source_cluster, topic, 0, 20)
    stop_file = tmp_path / "stop"
    spec = CopyTaskSpec(
        0,
        1,
        tuple((topic, p) for p in range(PARTITIONS)),
        deadline=time.time() + 300,
        stats_address=None,
        stop_file=str(stop_file),
    )
    task = task_module._CopyTask(settings, spec)
    # Looks every second rather than every 10: the decision is the same (tests/unit/test_fetch_watch.py).
    task.fetches = TaskFetches(
        settings, PARTITIONS, task.source, task.stats, watch_every=1.0, rebuild_every=3.0
    )
    outcome: list[object] = []
    runner = threading.Thread(target=lambda: outcome.append(_run(task)), daemon=True)
    with caplog.at_level("WARNING", logger="mirror.source.task"):
        runner.start()
        try:
            assert_eventually(lambda: _assert_copied(target_cluster, remote, 20 * PARTITIONS), timeout=60)
            first = task.source.consumers[0]
            # What librdkafka did to 3 partitions of a dead leader: it stops fetching it, no error said.
            first.pause([TopicPartition(topic, STOPPED)])
            _produce(source_cluster, topic, 1, 30)
            assert_eventually(lambda: _assert_copied(target_cluster, remote, 50 * PARTITIONS), timeout=60)
            assert task.source.consumers[0] is not first  # read through a new consumer
        finally:
            stop_file.touch()
            runner.join(timeout=60)
    assert outcome and not isinstance(outcome[0], BaseException), outcome
    copied = read_topic(target_cluster.bootstrap_servers, remote)
    assert {p: [r.value for r in records] for p, records in copied.items()} == {
        p: [b"%d-%d-%d" % (batch, p, n) for batch, count in ((0, 20), (1, 30)) for n in range(count)]
        for p in range(PARTITIONS)
    }
    said = [r.getMessage() for r in caplog.records if "through new consumers" in r.getMessage()]
    assert said and f"{topic}-{STOPPED} at 20, end 50" in said[0], said


def _assert_copied(cluster: KafkaCluster, topic: str, records: int) -> None:
    copied = {p: len(got) for p, got in read_topic(cluster.bootstrap_servers, topic, timeout=10).items()}
    assert sum(copied.values()) == records, copied


def _run(task: task_module._CopyTask) -> object:
    try:
        with task:
            return task.run()
    except BaseException as exc:  # noqa: BLE001 - handed to the test's thread
        return exc
