"""A group a migration moved stays where it was moved: what the running flow's group sync takes
back (a round that read the group before the move wrote it, and wrote after) is written again."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer

from mirror.config.flow_settings import FlowSettings
from mirror.migrate.groups import settle_moved
from tests.groups import commit, committed, produce
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration]


def _flow(source: KafkaCluster, target: KafkaCluster, **changes: Any) -> FlowSettings:
    return FlowSettings(
        source="A",
        target="B",
        source_consumer={},
        source_admin=source.properties(),
        source_producer={},
        target_producer={},
        target_consumer={},
        target_admin=target.properties(),
        topics=[],
        topics_exclude=[],
        sync_group_offsets_interval_seconds=0.5,
        **changes,
    )


def test_a_moved_group_taken_back_by_the_group_sync_is_written_again(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic, group = unique_name(request, "A.moved-"), unique_name(request, "moved-")
    create_topic(target_cluster.bootstrap_servers, topic, partitions=2)
    produce(target_cluster, topic, [b"x"] * 50, partition=0)
    produce(target_cluster, topic, [b"y"] * 50, partition=1)
    # The move wrote 40 and 30; a group-sync round then wrote its older translation over partition 0.
    commit(target_cluster, group, {(topic, 0): 12, (topic, 1): 30})
    said: list[str] = []

    settled = settle_moved(
        _flow(source_cluster, target_cluster), {group: {(topic, 0): 40, (topic, 1): 30}}, said.append
    )

    assert settled.unsettled == [] and settled.joined == {}
    assert committed(target_cluster, group, topic, partitions=2) == {0: 40, 1: 30}
    assert f"{group}: 1 partitions moved back by the group sync; written again" in said, said


def test_a_group_whose_consumers_started_on_the_target_is_said_and_left_where_they_read(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, request: pytest.FixtureRequest
) -> None:
    topic, group = unique_name(request, "A.joined-"), unique_name(request, "joined-")
    create_topic(target_cluster.bootstrap_servers, topic, partitions=1)
    produce(target_cluster, topic, [b"x"] * 20)
    commit(target_cluster, group, {(topic, 0): 5})
    member = Consumer(target_cluster.properties(**{"group.id": group, "enable.auto.commit": "false"}))
    try:
        member.subscribe([topic])

        def joined() -> None:
            member.poll(0.5)
            assert member.assignment(), "the member has no partition yet"

        assert_eventually(joined, timeout=60)
        said: list[str] = []

        settled = settle_moved(_flow(source_cluster, target_cluster), {group: {(topic, 0): 15}}, said.append)

        assert settled.unsettled == []
        assert settled.joined[group] == (
            f"its consumers started on B after the group sync moved it back (1 partitions, e.g. {topic}-0 "
            "to 5 instead of 15): they re-read from there"
        )
        assert f"{group}: {settled.joined[group]}" in said, said
    finally:
        member.close()
    assert committed(target_cluster, group, topic) == {0: 5}


@pytest.mark.parametrize("off", [{"sync_group_offsets": False}, {"emit_checkpoints": False}])
def test_with_no_group_sync_running_nothing_is_checked_and_nothing_waits(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, off: dict[str, bool]
) -> None:
    said: list[str] = []
    settled = settle_moved(
        _flow(source_cluster, target_cluster, **off), {"any": {("A.t", 0): 1}}, said.append
    )
    assert (settled.joined, settled.unsettled, said) == ({}, [], [])
