"""Active/active A<->B with the default policy, on one `mirror run` running both flows.

Both directions replicate and nothing loops; checkpoints go both ways, so a consumer group can
move from A to B and back by translated offsets. The clusters get aliases of their own (P and Q
plus a suffix) so the run's internal topics, positions groups and transactional ids are its own.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirror.client import MirrorClient
from tests.checkpoint_flow import values
from tests.groups import committed, consume_and_commit, produce, resume
from tests.helpers import assert_eventually, create_topic
from tests.kafka_backends import KafkaCluster
from tests.mirror_process import MirrorRun, wait_until_caught_up, write_config
from tests.records import assert_same_records, read_topic

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@dataclass
class ActiveActive:
    a: KafkaCluster
    b: KafkaCluster
    prefix: str
    config: Path
    run: MirrorRun

    def wait_until_copied(self, source: KafkaCluster, target: KafkaCluster, topics: list[str]) -> None:
        wait_until_caught_up(source, target, topics, self.run)

    def wait_until_synced(
        self, source: KafkaCluster, target: KafkaCluster, group: str, topic: str, expected: int
    ) -> None:
        """Wait until `target`'s `group` holds `expected`, the translated position of its `topic` on
        `source` (partition 0), and a checkpoint says so. A checkpoint from an offset sync older than
        the group's last record translates to less at first (MM2's translation, too): waited out."""
        remote = f"{source.alias}.{topic}"

        def synced() -> None:
            assert self.run.process.poll() is None, self.run.output()[-3000:]
            client = MirrorClient.from_config(self.config, target.alias)
            checkpoint = client.translate_offsets(source.alias, group).get((remote, 0))
            on_target = committed(target, group, remote).get(0)
            assert checkpoint == on_target == expected, (
                f"{group} at {on_target} on {target.alias}, checkpoint {checkpoint}, expected {expected}"
            )

        assert_eventually(synced, timeout=120, interval=0.5)


@pytest.fixture(scope="module")
def both_ways(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ActiveActive]:
    suffix = uuid.uuid4().hex[:4]
    a = dataclasses.replace(source_cluster, alias=f"P{suffix}")
    b = dataclasses.replace(target_cluster, alias=f"Q{suffix}")
    prefix = f"aa-{suffix}-"
    directory = tmp_path_factory.mktemp("active-active")
    # Each flow selects every test topic on its source, remote copies included: only cycle
    # detection keeps P.x on Q from going back to P as Q.P.x.
    config = write_config(
        directory,
        a,
        b,
        [f"({a.alias}\\.|{b.alias}\\.)?{prefix}.*"],
        groups=[f"{prefix}.*"],
        emit_checkpoints_interval_seconds=1,
        sync_group_offsets_interval_seconds=1,
        refresh_groups_interval_seconds=2,
    )
    document = yaml.safe_load(config.read_text())
    document["flows"][f"{b.alias}->{a.alias}"] = dict(document["flows"][f"{a.alias}->{b.alias}"])
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    run = MirrorRun(config, directory / "run.log")
    try:
        yield ActiveActive(a, b, prefix, config, run)
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.cleanup()


def test_both_directions_replicate_and_nothing_comes_back(both_ways: ActiveActive) -> None:
    a, b = both_ways.a, both_ways.b
    on_a, on_b = f"{both_ways.prefix}on-a", f"{both_ways.prefix}on-b"
    create_topic(a.bootstrap_servers, on_a, partitions=2)
    create_topic(b.bootstrap_servers, on_b, partitions=2)
    for cluster, topic in ((a, on_a), (b, on_b)):
        producer = Producer(cluster.properties())
        for i in range(2000):
            producer.produce(topic, key=b"%d" % i, value=b"%s-%d" % (topic.encode(), i), partition=i % 2)
        assert producer.flush(30) == 0

    both_ways.wait_until_copied(a, b, [on_a])
    both_ways.wait_until_copied(b, a, [on_b])
    # Proof that each flow rescanned its source after the other's remote topic appeared there:
    # a topic created now on each side comes through. Only then does "nothing came back" mean something.
    create_topic(a.bootstrap_servers, f"{on_a}-marker", partitions=1)
    create_topic(b.bootstrap_servers, f"{on_b}-marker", partitions=1)
    assert_eventually(lambda: _assert_exists(b, f"{a.alias}.{on_a}-marker"), timeout=120, interval=1)
    assert_eventually(lambda: _assert_exists(a, f"{b.alias}.{on_b}-marker"), timeout=120, interval=1)

    assert_same_records(
        read_topic(a.bootstrap_servers, on_a), read_topic(b.bootstrap_servers, f"{a.alias}.{on_a}")
    )
    assert_same_records(
        read_topic(b.bootstrap_servers, on_b), read_topic(a.bootstrap_servers, f"{b.alias}.{on_b}")
    )
    a_topics = set(AdminClient(a.properties()).list_topics(timeout=30).topics)
    b_topics = set(AdminClient(b.properties()).list_topics(timeout=30).topics)
    assert not [t for t in a_topics if t.startswith(f"{b.alias}.{a.alias}.")], "a remote topic went back to A"
    assert not [t for t in b_topics if t.startswith(f"{a.alias}.{b.alias}.")], "a remote topic went back to B"


def test_a_group_fails_over_to_the_other_cluster_and_back_by_translated_offsets(
    both_ways: ActiveActive,
) -> None:
    a, b = both_ways.a, both_ways.b
    local_a, local_b = f"{both_ways.prefix}orders", f"{both_ways.prefix}payments"
    group = f"{both_ways.prefix}app"
    create_topic(a.bootstrap_servers, local_a)
    create_topic(b.bootstrap_servers, local_b)
    produce(a, local_a, values("a", 0, 1000))
    produce(b, local_b, values("b", 0, 700))

    # The application runs on A and has read everything of its local topic.
    consume_and_commit(a, group, local_a, 0, 1000)
    both_ways.wait_until_copied(a, b, [local_a])
    both_ways.wait_until_synced(a, b, group, local_a, expected=1000)

    # Failover to B: it resumes A's topic there exactly where it stopped (records written on A
    # meanwhile arrive through the flow), and starts on B's local topic.
    produce(a, local_a, values("a", 1000, 1200))
    both_ways.wait_until_copied(a, b, [local_a])
    read = resume(b, group, f"{a.alias}.{local_a}", expected=200, and_commit=True)
    assert read == values("a", 1000, 1200), f"re-read or skipped on failover: got {len(read)} records"
    consume_and_commit(b, group, local_b, 0, 700)

    # Failback to A: B's checkpoints of the group come back through the reverse flow, so on A it
    # resumes the copy of B's topic exactly where it stopped on B. Exactly only once the reverse
    # flow synced B's record 699 (the trailing sync of a quiet partition), so the 100 records
    # written after it come once that sync is in: had the flow found the topic late and copied
    # all 800 at once, its syncs (0, 101, ..., 707, 799) put 700 at 607, MM2's translation too.
    both_ways.wait_until_copied(b, a, [local_b])
    both_ways.wait_until_synced(b, a, group, local_b, expected=700)
    produce(b, local_b, values("b", 700, 800))
    both_ways.wait_until_copied(b, a, [local_b])
    both_ways.wait_until_synced(b, a, group, local_b, expected=700)
    read = resume(a, group, f"{b.alias}.{local_b}", expected=100)
    assert read == values("b", 700, 800), f"re-read or skipped on failback: got {len(read)} records"
    # Its position on A's own topic is the one it left A with: the reverse flow never writes a
    # position for a topic that came from A (like MM2, it has no offset syncs for it), so the 200
    # records it read on B are read again on A, and none is skipped.
    assert committed(a, group, local_a) == {0: 1000}


def _assert_exists(cluster: KafkaCluster, topic: str) -> None:
    assert topic in AdminClient(cluster.properties()).list_topics(timeout=30).topics, f"no {topic} yet"
