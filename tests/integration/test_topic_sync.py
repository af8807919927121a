"""Topics, partitions and configs follow the source while `mirror run` is running."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    ResourcePatternType,
    ResourceType,
)

from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def produce(cluster: KafkaCluster, topic: str, partitions: range, count: int) -> None:
    producer = Producer(cluster.properties())
    for i in range(count):
        producer.produce(
            topic,
            key=b"%d" % i,
            value=b"%s-%d" % (topic.encode(), i),
            partition=partitions[i % len(partitions)],
        )
    assert producer.flush(30) == 0


def topic_config(cluster: KafkaCluster, topic: str, name: str) -> str | None:
    admin = AdminClient(cluster.properties())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    return admin.describe_configs([resource])[resource].result(timeout=30)[name].value  # type: ignore[no-any-return]


def partition_count(cluster: KafkaCluster, topic: str) -> int:
    return len(AdminClient(cluster.properties()).list_topics(topic, timeout=30).topics[topic].partitions)


def test_new_topics_new_partitions_and_config_changes_reach_the_target(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    prefix = unique_name(request, "sync-")
    first, second = f"{prefix}-first", f"{prefix}-second"
    create_topic(source_cluster.bootstrap_servers, first, partitions=2, config={"retention.ms": "1234567"})
    produce(source_cluster, first, range(2), 1000)
    config = write_config(
        tmp_path, source_cluster, target_cluster, [f"{prefix}-.*"], sync_topic_configs_interval_seconds=2
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [first], run)
        assert topic_config(target_cluster, f"A.{first}", "retention.ms") == "1234567"

        # While it runs: a new matching topic (compacted, with a property MM2 never copies), two
        # more partitions, and a changed config.
        create_topic(
            source_cluster.bootstrap_servers,
            second,
            partitions=3,
            config={"cleanup.policy": "compact", "unclean.leader.election.enable": "true"},
        )
        produce(source_cluster, second, range(3), 900)
        admin = AdminClient(source_cluster.properties())
        admin.create_partitions([NewPartitions(first, 4)])[first].result(timeout=30)
        produce(source_cluster, first, range(4), 1000)
        retention = ConfigEntry("retention.ms", "7654321", incremental_operation=AlterConfigOpType.SET)
        resource = ConfigResource(ConfigResource.Type.TOPIC, first, incremental_configs=[retention])
        admin.incremental_alter_configs([resource])[resource].result(timeout=30)

        wait_until_caught_up(source_cluster, target_cluster, [first, second], run)
        assert partition_count(target_cluster, f"A.{first}") == 4
        # Created with the source's configs, less the excluded ones (MM2's testReplication).
        assert topic_config(target_cluster, f"A.{second}", "cleanup.policy") == "compact"
        assert topic_config(target_cluster, f"A.{second}", "unclean.leader.election.enable") == "false"
        assert_eventually(
            lambda: _assert_equal(topic_config(target_cluster, f"A.{first}", "retention.ms"), "7654321"),
            timeout=30,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()
    for topic in (first, second):
        assert_same_records(
            read_topic(source_cluster.bootstrap_servers, topic),
            read_topic(target_cluster.bootstrap_servers, f"A.{topic}"),
        )


def test_topic_acls_are_synced_with_mm2_rules(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    topic = unique_name(request, "acl-")
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1)
    _allow(
        source_cluster,
        topic,
        [
            ("User:alice", AclOperation.READ),
            ("User:bob", AclOperation.ALL),
            ("User:carol", AclOperation.WRITE),
        ],
    )

    config = write_config(
        tmp_path, source_cluster, target_cluster, [topic], sync_topic_acls_interval_seconds=2
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        assert_eventually(
            lambda: _assert_equal(
                _acls(target_cluster, f"A.{topic}"),
                {
                    ("User:alice", "READ", "ALLOW"),
                    ("User:bob", "READ", "ALLOW"),
                },
            ),
            timeout=120,
            interval=1,
        )
        # Added while running: a later refresh carries the READ over and still leaves WRITE out
        # (the check waits for the READ, so the refresh that could have copied WRITE has run).
        _allow(source_cluster, topic, [("User:dave", AclOperation.READ), ("User:erin", AclOperation.WRITE)])
        assert_eventually(
            lambda: _assert_equal(
                _acls(target_cluster, f"A.{topic}"),
                {
                    ("User:alice", "READ", "ALLOW"),
                    ("User:bob", "READ", "ALLOW"),
                    ("User:dave", "READ", "ALLOW"),
                },
            ),
            timeout=120,
            interval=1,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()


def _allow(cluster: KafkaCluster, topic: str, grants: list[tuple[str, AclOperation]]) -> None:
    bindings = [
        AclBinding(
            ResourceType.TOPIC,
            topic,
            ResourcePatternType.LITERAL,
            principal,
            "*",
            operation,
            AclPermissionType.ALLOW,
        )
        for principal, operation in grants
    ]
    admin = AdminClient(cluster.properties())  # held until the answers: a collected client cancels them
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def _acls(cluster: KafkaCluster, topic: str) -> set[tuple[str, str, str]]:
    admin = AdminClient(cluster.properties())
    match = AclBindingFilter(
        ResourceType.TOPIC,
        topic,
        ResourcePatternType.LITERAL,
        None,
        None,
        AclOperation.ANY,
        AclPermissionType.ANY,
    )
    bindings = admin.describe_acls(match).result(timeout=30)
    return {(b.principal, b.operation.name, b.permission_type.name) for b in bindings}


def _assert_equal(actual: object, expected: object) -> None:
    assert actual == expected


def _set_topic_configs(cluster: KafkaCluster, topic: str, set_: dict[str, str], delete: list[str]) -> None:
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=entries)
    admin = AdminClient(cluster.properties())  # held until the answer: a collected client cancels it
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)


def _overrides(cluster: KafkaCluster, topic: str) -> dict[str, str]:
    """The configs set on the topic itself (not taken from a default)."""
    admin = AdminClient(cluster.properties())
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        entries = admin.describe_configs([resource])[resource].result(timeout=30)
    except KafkaException as exc:
        raise AssertionError(f"{topic} cannot be described (yet): {exc}") from exc
    return {
        name: entry.value
        for name, entry in entries.items()
        if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    }


def test_config_sync_resets_drift_reverts_removed_overrides_and_keeps_excluded_properties(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # MM2's testSyncTopicConfigs and testReplicateTargetDefault (use.defaults.from=target).
    topic = unique_name(request, "configs-")
    remote = f"A.{topic}"
    create_topic(
        source_cluster.bootstrap_servers,
        topic,
        partitions=1,
        config={"retention.ms": "1234567", "max.message.bytes": "2000000"},
    )
    config = write_config(
        tmp_path, source_cluster, target_cluster, [topic], sync_topic_configs_interval_seconds=2
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        assert_eventually(
            lambda: _assert_equal(
                _overrides(target_cluster, remote),
                {"retention.ms": "1234567", "max.message.bytes": "2000000"},
            ),
            timeout=120,
            interval=1,
        )
        # On the target: a synced property drifts, and an excluded one is set by hand.
        # On the source: one override removed.
        _set_topic_configs(
            target_cluster, remote, {"retention.ms": "999999", "unclean.leader.election.enable": "true"}, []
        )
        _set_topic_configs(source_cluster, topic, {}, ["max.message.bytes"])
        assert_eventually(
            lambda: _assert_equal(
                _overrides(target_cluster, remote),
                {"retention.ms": "1234567", "unclean.leader.election.enable": "true"},
            ),
            timeout=120,
            interval=1,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()


def test_use_defaults_from_source_sets_the_sources_defaults_on_the_remote_topic(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    # MM2's testReplicateSourceDefault: a property the source leaves at its default is set on the
    # remote topic to the source's default value, also over an override made on the target.
    topic = unique_name(request, "source-defaults-")
    remote = f"A.{topic}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=1, config={"retention.ms": "1234567"})
    default_segment_ms = topic_config(source_cluster, topic, "segment.ms")
    assert default_segment_ms is not None
    config = write_config(
        tmp_path,
        source_cluster,
        target_cluster,
        [topic],
        sync_topic_configs_interval_seconds=2,
        use_defaults_from="source",
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        created = {"retention.ms": "1234567", "segment.ms": default_segment_ms}
        assert_eventually(
            lambda: _assert_subset(created, _overrides(target_cluster, remote)), timeout=120, interval=1
        )
        _set_topic_configs(target_cluster, remote, {"segment.ms": "3600000"}, [])
        assert_eventually(
            lambda: _assert_subset({"segment.ms": default_segment_ms}, _overrides(target_cluster, remote)),
            timeout=120,
            interval=1,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()
    assert "unclean.leader.election.enable" not in _overrides(target_cluster, remote)  # excluded


def _assert_subset(expected: dict[str, str], actual: dict[str, str]) -> None:
    assert {k: actual.get(k) for k in expected} == expected, actual
