"""What `mirror run` does when it cannot copy a record as it is: clear errors, never a silent skip."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.helpers import create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def produce(cluster: KafkaCluster, topic: str, values: list[bytes]) -> None:
    producer = Producer(cluster.properties())
    for value in values:
        producer.produce(topic, value=value, partition=0)
    assert producer.flush(30) == 0


def mirror_errors(run: MirrorRun) -> list[str]:
    return [line for line in run.output().splitlines() if line.startswith("mirror: ")]


def test_a_record_larger_than_the_target_allows_stops_the_flow_with_one_line(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "big-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    # The remote topic exists already and accepts only small records.
    create_topic(
        target_cluster.bootstrap_servers, f"A.{topic}", partitions=1, config={"max.message.bytes": "2000"}
    )
    produce(source_cluster, topic, [b"small", b"x" * 20_000])

    run = MirrorRun(write_config(tmp_path, source_cluster, target_cluster, [topic]), tmp_path / "run.log")
    try:
        assert run.wait(timeout=240) == 1, run.output()[-3000:]
    finally:
        run.cleanup()
    errors = mirror_errors(run)
    assert len(errors) == 1, run.output()[-3000:]
    assert (
        f"flow A->B: {topic}-0: the record at offset 1 (20,000 bytes) is larger than B accepts" in errors[0]
    )
    assert "raise max.message.bytes" in errors[0]
    # Nothing of the failed range became visible: not even the small record before it.
    assert read_topic(target_cluster.bootstrap_servers, f"A.{topic}") == {0: []}


@pytest.mark.parametrize("policy", ["continue", "fail"])
def test_records_deleted_on_the_source_before_copying_are_reported(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    policy: str,
) -> None:
    topic = unique_name(request, "trunc-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    produce(source_cluster, topic, [b"first-%d" % i for i in range(100)])
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], on_source_truncation=policy)
    first = MirrorRun(config, tmp_path / "first.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [topic], first)
        assert first.stop() == 0
    finally:
        first.cleanup()

    # While mirror is down, 100 more records arrive and retention deletes 40 of them uncopied.
    produce(source_cluster, topic, [b"second-%d" % i for i in range(100)])
    admin = AdminClient(source_cluster.properties())
    future = admin.delete_records([TopicPartition(topic, 0, 140)])
    next(iter(future.values())).result(timeout=30)

    second = MirrorRun(config, tmp_path / "second.log")
    try:
        if policy == "fail":
            assert second.wait(timeout=240) == 1, second.output()[-3000:]
            errors = mirror_errors(second)
            assert len(errors) == 1, second.output()[-3000:]
            assert f"{topic}-0: 40 records (offsets 100..139) were deleted on the source" in errors[0]
            assert "on_source_truncation: continue" in errors[0]
            copied = read_topic(target_cluster.bootstrap_servers, f"A.{topic}")[0]
            assert [r.value for r in copied] == [b"first-%d" % i for i in range(100)]
            return
        wait_until_caught_up(source_cluster, target_cluster, [topic], second)
        assert second.stop() == 0
    finally:
        second.cleanup()
    assert "40 records (offsets 100..139) were deleted on the source" in second.output()
    copied = read_topic(target_cluster.bootstrap_servers, f"A.{topic}")[0]
    expected = [b"first-%d" % i for i in range(100)] + [b"second-%d" % i for i in range(40, 100)]
    assert [r.value for r in copied] == expected
