"""Active/active A<->B with the default policy: both directions replicate, nothing loops."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from tests.helpers import assert_eventually, create_topic, unique_name
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_both_directions_replicate_and_nothing_comes_back(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    on_a, on_b = unique_name(request, "aa-"), unique_name(request, "bb-")
    create_topic(source_cluster.bootstrap_servers, on_a, partitions=2)
    create_topic(target_cluster.bootstrap_servers, on_b, partitions=2)
    for cluster, topic in ((source_cluster, on_a), (target_cluster, on_b)):
        producer = Producer(cluster.properties())
        for i in range(2000):
            producer.produce(topic, key=b"%d" % i, value=b"%s-%d" % (topic.encode(), i), partition=i % 2)
        assert producer.flush(30) == 0

    # Each flow selects every test topic on its source, remote copies included: only cycle
    # detection keeps A.<on_a> on B from going back to A as B.A.<on_a>.
    pattern = f"(A\\.|B\\.)?({on_a}|{on_b})(-marker)?"
    config = write_config(tmp_path, source_cluster, target_cluster, [pattern])
    document = yaml.safe_load(config.read_text())
    document["flows"]["B->A"] = dict(document["flows"]["A->B"])
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    run = MirrorRun(config, tmp_path / "run.log")
    try:
        wait_until_caught_up(source_cluster, target_cluster, [on_a], run)
        wait_until_caught_up(
            target_cluster, source_cluster, [on_b], run, remote_prefix="B.", group_flow="B-A"
        )
        # Proof that each flow rescanned its source after the other's remote topic appeared there:
        # a topic created now comes through. Only then does "nothing came back" mean something.
        create_topic(source_cluster.bootstrap_servers, f"{on_a}-marker", partitions=1)
        create_topic(target_cluster.bootstrap_servers, f"{on_b}-marker", partitions=1)
        assert_eventually(lambda: _assert_exists(target_cluster, f"A.{on_a}-marker"), timeout=120, interval=1)
        assert_eventually(lambda: _assert_exists(source_cluster, f"B.{on_b}-marker"), timeout=120, interval=1)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()

    assert_same_records(
        read_topic(source_cluster.bootstrap_servers, on_a),
        read_topic(target_cluster.bootstrap_servers, f"A.{on_a}"),
    )
    assert_same_records(
        read_topic(target_cluster.bootstrap_servers, on_b),
        read_topic(source_cluster.bootstrap_servers, f"B.{on_b}"),
    )
    a_topics = set(AdminClient(source_cluster.properties()).list_topics(timeout=30).topics)
    b_topics = set(AdminClient(target_cluster.properties()).list_topics(timeout=30).topics)
    assert not [t for t in a_topics if t.startswith(f"B.A.{on_a}")], "a remote topic went back to A"
    assert not [t for t in b_topics if t.startswith(f"A.B.{on_b}")], "a remote topic went back to B"


def _assert_exists(cluster: KafkaCluster, topic: str) -> None:
    assert topic in AdminClient(cluster.properties()).list_topics(timeout=30).topics, f"no {topic} yet"
