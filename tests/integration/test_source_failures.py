"""A source topic deleted and re-created between runs: detected, never a silent skip.

More of these cases (retention, records the target refuses) are in tests/reliability."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.groups import produce
from tests.helpers import assert_eventually, create_topic
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, replicate_until_caught_up, write_config
from tests.records import read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


POLICIES = ("continue", "fail")
OLD = [b"old-%d" % i for i in range(100)]


@pytest.fixture(scope="module")
def copied_topics(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """For each policy a one-partition topic holding OLD, all copied by one run that then stopped:
    the policy only matters to the run after the topic is re-created, so the first run is shared."""
    tag = uuid.uuid4().hex[:6]
    topics = {policy: f"recreated-{policy}-{tag}" for policy in POLICIES}
    for topic in topics.values():
        create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
        produce(source_cluster, topic, OLD)
    directory = tmp_path_factory.mktemp("recreated")
    config = write_config(directory, source_cluster, target_cluster, list(topics.values()))
    replicate_until_caught_up(
        config, directory / "first.log", source_cluster, target_cluster, list(topics.values())
    )
    return topics


@pytest.mark.parametrize("policy", POLICIES)
def test_a_source_topic_deleted_and_recreated_is_detected(
    source_cluster: KafkaCluster,
    target_cluster: KafkaCluster,
    tmp_path: Path,
    copied_topics: dict[str, str],
    policy: str,
) -> None:
    topic = copied_topics[policy]
    config = write_config(tmp_path, source_cluster, target_cluster, [topic], on_source_truncation=policy)

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
        expected = OLD + [b"new-%d" % i for i in range(30)]
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
