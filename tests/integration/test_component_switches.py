"""Switched-off components run nothing of theirs (MM2's connector enablement), on one `mirror run`.

Three flows over the same two brokers under aliases of their own: one copying with checkpoints and
heartbeats off, one with heartbeats on (the proof that heartbeat rounds ran, so that "none from
the other" means something), and one disabled.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
import yaml
from confluent_kafka.admin import AdminClient

from mirror.errors import WireFormatError
from mirror.flow.tail import PartitionTail
from mirror.kafka.wire import Heartbeat
from tests.helpers import assert_eventually, create_topic
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import assert_same_records, read_topic
from tests.seeding import produce_mixed

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_flows_with_components_off_or_disabled_create_and_emit_nothing_of_theirs(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:4]
    quiet, beating, disabled = (f"{name}{suffix}" for name in ("S", "H", "D"))
    topic = f"switches-{suffix}"
    create_topic(source_cluster.bootstrap_servers, topic, partitions=2)
    produce_mixed(source_cluster, topic, 600, 2, seed=21)

    document = yaml.safe_load(write_config(tmp_path, source_cluster, target_cluster, [topic]).read_text())
    flow = document["flows"].pop("A->B")
    document["clusters"] = {
        f"{alias}{side}": {"bootstrap_servers": cluster.bootstrap_servers}
        for alias in (quiet, beating, disabled)
        for side, cluster in (("a", source_cluster), ("b", target_cluster))
    }
    document["flows"] = {
        f"{quiet}a->{quiet}b": {
            **flow,
            "emit_checkpoints": False,
            "sync_group_offsets": False,
            "emit_heartbeats": False,
        },
        f"{beating}a->{beating}b": {**flow, "topics": ["nothing-matches-this"], "emit_checkpoints": False},
        f"{disabled}a->{disabled}b": {**flow, "enabled": False},
    }
    config = tmp_path / "mm2.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(
            source_cluster,
            target_cluster,
            [topic],
            run,
            remote_prefix=f"{quiet}a.",
            group_flow=f"{quiet}a-{quiet}b",
        )
        # Heartbeat rounds ran: the other flow's heartbeats reached B (and its reverse ones A).
        assert_eventually(
            lambda: _assert_heartbeat_from(target_cluster, f"{beating}a", f"{beating}b"),
            timeout=120,
            interval=1,
        )
        assert_eventually(
            lambda: _assert_heartbeat_from(source_cluster, f"{beating}b", f"{beating}a"),
            timeout=60,
            interval=1,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, topic),
        read_topic(target_cluster.bootstrap_servers, f"{quiet}a.{topic}"),
    )
    on_a = set(AdminClient(source_cluster.properties()).list_topics(timeout=30).topics)
    on_b = set(AdminClient(target_cluster.properties()).list_topics(timeout=30).topics)
    # Offset syncs stay on: the flow keeps writing them (exactly-once: on the target).
    assert f"mm2-offset-syncs.{quiet}a.internal" in on_b
    assert f"{quiet}a.checkpoints.internal" not in on_b
    assert f"mm2-checkpoint-offsets.{quiet}a.internal" not in on_b
    assert _heartbeat_pairs(target_cluster) & {(f"{quiet}a", f"{quiet}b")} == set()
    assert _heartbeat_pairs(source_cluster) & {(f"{quiet}b", f"{quiet}a")} == set()
    # The disabled flow: not a topic, group or heartbeat of its own anywhere.
    assert not [t for t in on_a | on_b if disabled in t], sorted(t for t in on_a | on_b if disabled in t)
    groups = AdminClient(target_cluster.properties()).list_consumer_groups().result(timeout=30).valid
    assert not [g.group_id for g in groups if disabled in g.group_id]
    pairs = _heartbeat_pairs(target_cluster) | _heartbeat_pairs(source_cluster)
    assert not [pair for pair in pairs if disabled in pair[0] or disabled in pair[1]]


def _assert_heartbeat_from(cluster: KafkaCluster, source: str, target: str) -> None:
    assert (source, target) in _heartbeat_pairs(cluster), f"no heartbeat {source}->{target} yet"


def _heartbeat_pairs(cluster: KafkaCluster) -> set[tuple[str, str]]:
    """(source, target) of every heartbeat in the cluster's own `heartbeats` topic."""
    if "heartbeats" not in AdminClient(cluster.properties()).list_topics(timeout=30).topics:
        return set()
    tail = PartitionTail(cluster.properties(), "heartbeats")
    pairs: set[tuple[str, str]] = set()
    try:
        for record in tail.catch_up():
            try:
                beat = Heartbeat.decode(record.key, record.value)
            except WireFormatError:
                continue  # not ours to judge here
            pairs.add((beat.source_alias, beat.target_alias))
    finally:
        tail.close()
    return pairs
