"""`mirror status mm2.yaml`: a flow's state from the clusters alone, while `mirror run` runs, after it
stopped, and for a flow never run over a thousand partitions."""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

from tests.groups import commit, produce
from tests.helpers import assert_eventually, create_topic, run_mirror
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def status(config: Path) -> dict[str, Any]:
    result = run_mirror("status", str(config), "--json", timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    (line,) = result.stdout.splitlines()
    return json.loads(line)  # type: ignore[no-any-return]


def test_status_follows_a_flow_from_running_to_stopped_with_lag_groups_and_heartbeats(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:4]
    source = dataclasses.replace(source_cluster, alias=f"S{tag}")
    target = dataclasses.replace(target_cluster, alias=f"T{tag}")
    topic, group = f"status-{tag}", f"status-group-{tag}"
    create_topic(source.bootstrap_servers, topic, partitions=3)
    for partition in range(3):
        produce(source, topic, [b"%d" % i for i in range(100)], partition=partition)
    commit(source, group, {(topic, 0): 60, (topic, 1): 100})
    config = write_config(
        tmp_path,
        source,
        target,
        [topic],
        groups=[group],
        emit_checkpoints_interval_seconds=1,
        sync_group_offsets_interval_seconds=1,
    )
    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source, target, [topic], run)

        def running_with_a_checkpointed_group() -> dict[str, Any]:
            now = status(config)
            assert now["state"] == "running", now
            assert [g["group"] for g in now["groups"]] == [group], now
            return now

        running = assert_eventually(running_with_a_checkpointed_group, timeout=90, interval=1)
        exit_code = run.stop()
    finally:
        run.cleanup()
    assert exit_code == 0, run.output()[-3000:]
    assert running["flow"] == f"{source.alias}->{target.alias}"
    assert running["warnings"] == []  # lag: heartbeats keep arriving, so only the topic's is 0
    # Heartbeats topics are copied whatever the filter says, and listed too.
    topics = {row["topic"]: row for row in running["topics"]}
    assert topics[topic] == {"topic": topic, "partitions": 3, "lag": 0, "never_copied": 0}
    assert "heartbeats" in topics
    assert running["last_copy_age_seconds"] is not None and running["last_copy_age_seconds"] < 120
    assert running["heartbeat_age_seconds"] is not None and running["heartbeat_age_seconds"] < 60
    assert running["groups"][0]["partitions"] == 2 and running["groups"][0]["active_on_target"] is False

    produce(source, topic, [b"late"] * 25, partition=2)
    stopped = status(config)
    assert stopped["state"] == "stopped", stopped
    waiting = {row["topic"]: row["lag"] for row in stopped["topics"]}
    assert waiting[topic] == 25
    assert stopped["warnings"] == [
        f"{stopped['lag']:,} records wait on {source.alias} while the flow is not running"
    ]
    text = run_mirror("status", str(config))
    assert text.returncode == 0 and text.stdout.startswith(f"flow {source.alias}->{target.alias}: stopped")


def test_status_of_a_flow_never_run_over_a_thousand_partitions(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path
) -> None:
    tag = uuid.uuid4().hex[:4]
    source = dataclasses.replace(source_cluster, alias=f"S{tag}")
    target = dataclasses.replace(target_cluster, alias=f"T{tag}")
    topic = f"status-wide-{tag}"
    create_topic(source.bootstrap_servers, topic, partitions=1000)
    config = write_config(tmp_path, source, target, [topic, f"nothing-{tag}"])
    try:
        started = time.monotonic()
        never = status(config)
        elapsed = time.monotonic() - started
    finally:
        admin = AdminClient(source.properties())  # kept alive until the answer comes
        admin.delete_topics([topic])[topic].result(timeout=60)
    assert never["state"] == "never-run", never
    topics = {row["topic"]: row for row in never["topics"]}
    assert topics[topic] == {"topic": topic, "partitions": 1000, "lag": 0, "never_copied": 1000}
    assert f"nothing-{tag}" not in topics
    assert never["groups"] == [] and never["heartbeat_age_seconds"] is None
    print(f"mirror status over 1,000 partitions: {elapsed:.1f} s")  # noqa: T201 - quoted in the notes
