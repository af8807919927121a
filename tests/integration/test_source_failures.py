"""A source topic deleted and re-created between runs: detected, never a silent skip.

More of these cases (retention, records the target refuses) are in tests/reliability."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.groups import produce
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, replicate_until_caught_up, write_config
from tests.records import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def replicated_topic(
    source: KafkaCluster, target: KafkaCluster, directory: Path, topic: str, first: list[bytes], policy: str
) -> Path:
    """A one-partition topic holding `first`, copied to the target by a run that then stopped."""
    create_topic(source.bootstrap_servers, topic, partitions=1)
    produce(source, topic, first)
    config = write_config(directory, source, target, [topic], on_source_truncation=policy)
    replicate_until_caught_up(config, directory / "first.log", source, target, [topic])
    return config


@pytest.mark.parametrize("policy", ["continue", "fail"])
def test_a_source_topic_deleted_and_recreated_is_detected(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    policy: str,
) -> None:
    topic = unique_name(request, "recreated-")
    old = [b"old-%d" % i for i in range(100)]
    config = replicated_topic(source_cluster, target_cluster, tmp_path, topic, old, policy)

    admin = AdminClient(source_cluster.properties())
    admin.delete_topics([topic])[topic].result(timeout=30)
    assert_eventually(lambda: _assert_absent(admin, topic), timeout=60)
    assert_eventually(lambda: _recreate(source_cluster, topic), timeout=60)
    produce(source_cluster, topic, [b"new-%d" % i for i in range(30)])

    second = MirrorRun(config, tmp_path / "second.log")
    try:
        if policy == "fail":
            assert second.wait(timeout=240) == 1, second.output()[-3000:]
            errors = second.errors()
            assert len(errors) == 1, second.output()[-3000:]
            assert (
                f"{topic}-0: the source partition now ends at offset 30, below the 100 records" in errors[0]
            )
            return
        # The old positions (100) are past the new topic's end (30): wait for the records themselves.
        expected = [b"old-%d" % i for i in range(100)] + [b"new-%d" % i for i in range(30)]
        assert_eventually(
            lambda: _assert_equal(_values(target_cluster, f"A.{topic}"), expected), timeout=180, interval=2
        )
        assert second.stop() == 0, second.output()[-3000:]
    finally:
        second.cleanup()
    assert "the topic was deleted and re-created" in second.output()
    assert _values(target_cluster, f"A.{topic}") == expected


def _values(cluster: KafkaCluster, topic: str) -> list[bytes | None]:
    return [record.value for record in read_topic(cluster.bootstrap_servers, topic)[0]]


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected


def _recreate(cluster: KafkaCluster, topic: str) -> None:
    try:
        create_topic(cluster.bootstrap_servers, topic, partitions=1)
    except KafkaException as exc:  # the broker may still be deleting the old topic
        raise AssertionError(str(exc)) from exc


def _assert_absent(admin: AdminClient, topic: str) -> None:
    assert topic not in admin.list_topics(timeout=30).topics
