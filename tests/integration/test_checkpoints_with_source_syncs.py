"""Checkpoints and group sync with the offset syncs on the source cluster (MM2's default location).

At-least-once, `mirror` keeps them there as MM2 does: the source component writes them into A,
the checkpoint component reads them from A. A group moved to B must resume as it does with the
syncs on the target (tests/integration/test_checkpoints.py), and no sync of the flow may land on B.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from mirror.kafka.tail import PartitionTail
from mirror.kafka.wire import OffsetSync
from tests.checkpoint_flow import OFFSET_LAG_MAX, Flow, values
from tests.groups import produce, resume
from tests.kafka_backends import KafkaCluster

pytestmark = [pytest.mark.integration, pytest.mark.slow]


@pytest.fixture(scope="module")
def flow(
    source_cluster: KafkaCluster, target_cluster: KafkaCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Flow]:
    running = Flow(
        source_cluster, target_cluster, tmp_path_factory.mktemp("source-syncs"), exactly_once=False
    )
    try:
        yield running
        assert running.run.stop() == 0, running.run.output()[-3000:]
    finally:
        running.run.cleanup()


def _syncs_for(cluster: KafkaCluster, syncs_topic: str, topic: str) -> list[OffsetSync]:
    """The OffsetSyncs of `topic` in `syncs_topic` on `cluster` (none if that topic does not exist)."""
    if syncs_topic not in AdminClient(cluster.properties()).list_topics(timeout=30).topics:
        return []
    tail = PartitionTail(cluster.properties(), syncs_topic)
    try:
        decoded = (OffsetSync.decode(record.key, record.value) for record in tail.catch_up())
        return [sync for sync in decoded if sync.topic == topic]
    finally:
        tail.close()


def test_a_caught_up_group_resumes_on_the_target_with_nothing_re_read(flow: Flow) -> None:
    topic, group = flow.moved_group("caught-up", values("old", 0, 2000), consumed=2000)

    produce(flow.source, topic, values("new", 0, 300))
    flow.wait_until_copied(topic)
    read = resume(flow.target, group, f"A.{topic}", expected=300)

    assert read == values("new", 0, 300), f"re-read or skipped: got {len(read)} records"
    # MM2's naming: the topic on A is named after the other cluster, B; the location the target
    # would use (mm2-offset-syncs.A.internal on B) holds nothing of this flow's topic.
    assert _syncs_for(flow.source, "mm2-offset-syncs.B.internal", topic)
    assert _syncs_for(flow.target, "mm2-offset-syncs.A.internal", topic) == []


def test_a_mid_stream_group_skips_nothing_and_re_reads_less_than_one_sync_interval(flow: Flow) -> None:
    topic, group = flow.moved_group("mid-stream", values("r", 0, 2000), consumed=777)

    read = resume(flow.target, group, f"A.{topic}", expected=2000 - 777)

    unread = values("r", 777, 2000)
    re_read = len(read) - len(unread)
    assert read[re_read:] == unread, "the group skipped records or read them out of order"
    assert read[:re_read] == values("r", 777 - re_read, 777)
    assert 0 <= re_read <= OFFSET_LAG_MAX + 1
