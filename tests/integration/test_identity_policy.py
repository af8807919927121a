"""A whole flow under the identity replication policy (migrations): names kept end to end.

Kafka's IdentityReplicationIntegrationTest runs its base suite with this policy; here one run
checks what changes with it: records land in a topic of the same name (also one created by hand
beforehand), checkpoints and the synced group name that topic, heartbeats still arrive prefixed
(A.heartbeats), and topic configs follow the source.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from mirror.client import MirrorClient
from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Heartbeat
from tests.groups import committed, consume_and_commit, produce
from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _retention(cluster: KafkaCluster, topic: str) -> str | None:
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = AdminClient(cluster.properties())  # held until the answer: a collected client cancels it
    entries = admin.describe_configs([resource])[resource].result(timeout=30)
    return entries["retention.ms"].value  # type: ignore[no-any-return]


def _newest_heartbeat_ms(cluster: KafkaCluster, topic: str) -> int:
    tail = PartitionTail(cluster.properties(), topic)
    try:
        return max((Heartbeat.decode(r.key, r.value).timestamp_ms for r in tail.catch_up()), default=0)
    finally:
        tail.close()


def test_an_identity_flow_keeps_topic_names_for_records_checkpoints_groups_and_configs(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    fresh, prepared = unique_name(request, "same-"), unique_name(request, "by-hand-")
    group = unique_name(request, "same-group-")
    create_topic(source_cluster.bootstrap_servers, fresh, partitions=1, config={"retention.ms": "1234567"})
    create_topic(source_cluster.bootstrap_servers, prepared, partitions=2)
    create_topic(target_cluster.bootstrap_servers, prepared, partitions=2)  # made by hand, empty
    produce(source_cluster, fresh, [b"f-%d" % i for i in range(1000)])
    produce(source_cluster, prepared, [b"p-%d" % i for i in range(600)], partition=1)
    position = consume_and_commit(source_cluster, group, fresh, 0, 1000)  # caught up on A

    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [fresh, prepared],
        groups=[group],
        replication_policy="identity",
        emit_checkpoints_interval_seconds=1,
        sync_group_offsets_interval_seconds=1,
        sync_topic_configs_interval_seconds=2,
    )
    started_ms = int(time.time() * 1000)
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [fresh, prepared], run, remote_prefix="")
        client = MirrorClient.from_config(config, "B")
        assert_eventually(
            lambda: _assert_equal(client.translate_offsets("A", group), {(fresh, 0): position}),
            timeout=120,
            interval=1,
        )
        assert_eventually(
            lambda: _assert_equal(committed(target_cluster, group, fresh), {0: position}),
            timeout=120,
            interval=1,
        )
        # Heartbeats keep their prefix under this policy, so the topology stays visible.
        assert_eventually(
            lambda: _assert_after(_newest_heartbeat_ms(target_cluster, "A.heartbeats"), started_ms),
            timeout=120,
            interval=1,
        )
        # Other tests' flows (aliases of their own) leave heartbeats topics on B too: look for A's.
        assert "A" in client.upstream_clusters()
        assert client.replication_hops("A") == 1
        # Configs: copied at creation, and followed afterwards into the topic made by hand.
        assert _retention(target_cluster, fresh) == "1234567"
        retention = ConfigEntry("retention.ms", "7654321", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, prepared, incremental_configs=[retention])
        admin = AdminClient(source_cluster.properties())
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)
        assert_eventually(
            lambda: _assert_equal(_retention(target_cluster, prepared), "7654321"), timeout=120, interval=1
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    for topic in (fresh, prepared):
        assert_same_records(
            read_topic(source_cluster.bootstrap_servers, topic),
            read_topic(target_cluster.bootstrap_servers, topic),
        )
    topics = AdminClient(target_cluster.properties()).list_topics(timeout=30).topics
    assert f"A.{fresh}" not in topics and f"A.{prepared}" not in topics


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected


def _assert_after(newest_ms: int, started_ms: int) -> None:
    assert newest_ms > started_ms, "no heartbeat from this run yet"
